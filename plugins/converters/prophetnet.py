"""ProphetNet: a post-LN encoder-decoder with learned positions from padding_idx + 1 and an
embedding LayerNorm, whose decoder runs predicting streams (`ngram`) beside the tokens
through n-stream self-attention (`ngram_streams`, relative buckets); the LM head scores the
first predicting stream (transformers' `logits`) and the others (`logits_ngram`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from archzoo.parts.converter import Converter, get, parse_fields, spec_parts
from archzoo.parts.hf_tensors import TensorTable

from .common import ACTIVATION, HEADLESS, TASK_LM, table, task, tie

# {s}: "encoder." / "decoder." in the models, "" in the standalone ProphetNetEncoder/Decoder
TENSORS = """
    word_embeddings|{s}word_embeddings      WORD        # one table for both stacks
    {s}position_embeddings                  POSITION
    {s}embeddings_layer_norm                EMBED_NORM
    {s}ngram_embeddings                     STREAM_TABLE
    {s}layers.{i}.self_attn.(query_proj,key_proj,value_proj,out_proj)  Q,K,V,ATTN_OUT
    {s}layers.{i}.self_attn.relative_pos_embeddings                    STREAM_RELATIVE
    {s}layers.{i}.cross_attn.(query_proj,key_proj,value_proj,out_proj) CROSS_Q,CROSS_K,CROSS_V,CROSS_OUT
    {s}layers.{i}.(self_attn_layer_norm,cross_attn_layer_norm)         ATTN_NORM,CROSS_NORM
    {s}layers.{i}.feed_forward.(intermediate,output)                   FC_IN,FC_OUT
    {s}layers.{i}.feed_forward_layer_norm                              FFN_NORM
"""
STACKS = {"encoder": {"s": "encoder."}, "decoder": {"s": "decoder."}}
STANDALONE = ("Encoder", "Decoder")  # their tensors sit at the top, no stack name
UNUSED_CROSS = ("layers.{i}.cross_attn.{m}.{p}", "layers.{i}.cross_attn_layer_norm.{p}")


class ProphetNetConverter(
    Converter, model_type="prophetnet", hf_prefix="ProphetNet", family="encoder-decoder"
):
    requires = {"disable_ngram_loss": False, "eps": 0.0}  # the loss: every stream, unsmoothed
    fixed = spec_parts(
        "tie_embeddings: true, block: post_ln, ffn: mlp",
        "embedding: {kind: token, norm: true}, norm: {kind: layernorm, eps: 1.0e-5}",
        "position: {kind: learned}, attention: {kind: mha, fused_qkv: false, bias: true}",
        "decoder: {embedding: {kind: token, norm: true}, attention: {kind: ngram_streams, "
        "fused_qkv: false, bias: true, predict_bias_rows: stream_major}}",
    )
    fields = parse_fields(
        """
        pad_token_id                pad_token_id                    0
        vocab_size                  vocab_size
        hidden_size                 d_model
        num_encoder_layers          n_layers
        num_encoder_attention_heads n_heads
        encoder_ffn_dim             d_ff
        num_decoder_layers          decoder.n_layers
        num_decoder_attention_heads decoder.n_heads
        decoder_ffn_dim             decoder.d_ff
        max_position_embeddings     max_len
        dropout                     dropout                         0.1
        attention_dropout           attention_dropout               0.1
        activation_dropout          ffn.inner_dropout               0.1
        activation_function         ffn.activation                  gelu    ACTIVATION
        ngram                       decoder.embedding.predict_streams   2
        num_buckets                 decoder.attention.buckets       32
        relative_max_distance       decoder.attention.max_distance  128
        """,
        ACTIVATION=ACTIVATION,
    )
    tasks = {
        "Model": HEADLESS,
        "ForConditionalGeneration": task("kind: lm", TASK_LM, fields=(tie(True),)),
        "ForCausalLM": task(
            "kind: lm, shift: false",  # transformers scores labels as given, unshifted
            TASK_LM,
            fields=(tie(True),),
            family="decoder",
            ignore=UNUSED_CROSS,
        ),
        "Encoder": task("kind: none", family="encoder"),
        "Decoder": task("kind: none", family="decoder", ignore=UNUSED_CROSS),
    }
    default_task = "ForConditionalGeneration"
    tensors = table(TENSORS, prefixes=("prophetnet.", ""), stacks=STACKS)

    def task_table(self, task: str, spec: Mapping[str, Any] | None = None) -> TensorTable:
        """The standalone stacks' tensors carry no stack name."""
        out = super().task_table(task, spec)
        if task in STANDALONE:
            out = replace(out, stacks={k: {"s": ""} for k in STACKS}, prefixes=("",))
        return out

    def export_prefix(self, task: str | None = None) -> str:
        return "" if task in STANDALONE else super().export_prefix(task)

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Positions start after padding_idx: the first pad_token_id + 1 rows are unused."""
        offset = get(config, "pad_token_id", 0) + 1
        spec["position"]["offset"] = offset
        spec["max_len"] -= offset

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """The position offset as padding_idx + 1, the table as max_len + offset rows; a
        decoder alone is exported without the cross-attention no input reaches."""
        if spec["family"] == "decoder":
            config["add_cross_attention"] = False
        offset = spec["position"].get("offset", 1)
        config["pad_token_id"] = offset - 1
        config["max_position_embeddings"] = spec["max_len"] + offset
