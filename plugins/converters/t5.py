"""T5: RMSNorm pre-LN encoder-decoder, bucketed relative bias, unscaled scores, rescaled tied head."""

from __future__ import annotations

from typing import Any

from archzoo.parts.converter import Converter, Field, Values, get, parse_fields, spec_parts
from archzoo.parts.hf_tensors import TensorTable

from .common import HEADLESS, QUESTION_ANSWERING, eos_classifier, lm_task, table, task

FFN = Values(
    {
        "relu": {"kind": "mlp", "activation": "relu", "bias": False},
        "gated-gelu": {"kind": "glu", "activation": "geglu_new", "bias": False},  # gelu_new
        "gated-silu": {"kind": "glu", "activation": "swiglu", "bias": False},
    }
)


def t5_table(position: str) -> TensorTable:
    """T5's tensors (both stacks), with `position` the rule of its relative bias table(s)."""
    return table(
        "shared|{s}.embed_tokens                             WORD    # one table, both stacks\n"
        + position
        + """
        {s}.block.{i}.layer.0.SelfAttention.(q,k,v,o)       Q,K,V,ATTN_OUT
        {s}.block.{i}.layer.1.EncDecAttention.(q,k,v,o)     CROSS_Q,CROSS_K,CROSS_V,CROSS_OUT
        {s}.block.{i}.layer.(0,1,{ffn}).layer_norm          ATTN_NORM,CROSS_NORM,FFN_NORM
        {s}.block.{i}.layer.{ffn}.DenseReluDense.(wi,wo)    FC_IN,FC_OUT    # relu
        {s}.block.{i}.layer.{ffn}.DenseReluDense.(wi_0,wi_1,wo)     GATE,UP,DOWN    # gated
        {s}.final_layer_norm                                FINAL_NORM
        """,
        prefixes=("transformer.", ""),  # transformer.: ...ForTokenClassification
        stacks={"encoder": {"s": "encoder", "ffn": "1"}, "decoder": {"s": "decoder", "ffn": "2"}},
    )


class T5Converter(Converter, model_type="t5", hf_prefix="T5", family="encoder-decoder"):
    fixed = spec_parts(
        "tie_embeddings: true, embedding: token, position: t5_relative",
        "block: pre_ln, norm: rmsnorm",
        "attention: {kind: mha, fused_qkv: false, bias: false, scale: 1.0}",  # unscaled scores
    )
    fields = (
        *parse_fields(
            """
            pad_token_id                        pad_token_id            0
            n_positions                         max_len                 512
            vocab_size                          vocab_size
            d_model                             d_model
            num_layers                          n_layers
            num_heads                           n_heads
            d_kv                                head_dim
            d_ff                                d_ff
            dropout_rate                        dropout                 0.1
            relative_attention_num_buckets      position.n_buckets      32
            relative_attention_max_distance     position.max_distance   128
            layer_norm_epsilon                  norm.eps                1e-6
            feed_forward_proj                   ffn                     relu    FFN
            """,
            FFN=FFN,
        ),
        Field("num_decoder_layers", "decoder.n_layers", lambda c: get(c, "num_layers")),
    )
    # HF sublayers: 0 self-attention, then cross-attention (decoder), then the FFN ({ffn})
    tasks = {
        "Model": HEADLESS,
        "ForConditionalGeneration": lm_task(True),
        "EncoderModel": task("kind: none", family="encoder"),
        "ForTokenClassification": task(
            "kind: token_classifier", "classifier  CLASSIFIER", family="encoder", labels=True
        ),
        "ForQuestionAnswering": QUESTION_ANSWERING,  # on the decoder's states
        "ForSequenceClassification": eos_classifier(1),
    }
    tensors = t5_table("{s}.block.0.layer.0.SelfAttention.relative_attention_bias  POSITION")

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """The tied LM head rescales by d_model^-0.5 unless config.json says otherwise."""
        if spec["head"]["kind"] == "lm":
            tied = spec["head"]["tie"]
            spec["head"]["rescale"] = bool(get(config, "scale_decoder_outputs", tied))
