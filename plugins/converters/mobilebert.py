"""MobileBERT (Sun et al., 2020): BERT's encoder, embeddings and heads, each layer a
`bottleneck` block (an input bottleneck d -> intra_bottleneck_size, q and k from a bottleneck
of their own and v from the layer input, num_feedforward_networks FFNs, an output bottleneck),
NoNorm as the `affine` norm, the trigram input as the `factorized` embedding's projected
trigram, and an MLM head whose LayerNorm transform feeds a decoder tied to the E-wide table
and extended over the other columns by `cls.predictions.dense` (transposed)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from archzoo.parts.converter import ConversionError, Field, get, parse_fields, spec_parts
from archzoo.parts.hf_tensors import TensorTable, parse_rules

from .bert import POOLER, BertConverter
from .common import (
    ACTIVATION,
    BERT_BUFFERS,
    BERT_EMBEDDINGS,
    PAD,
    PATHS,
    SIZES,
    encoder_tasks,
    task,
    tie,
)

LAYER = "encoder.layer.{i}."
EXTRA_FFNS = 16  # table rules for the extra FFNs 0..15 (each applies where the model has it)
FFN_PATHS = {
    f"{name}{j}": PATHS["BLOCK"] + f"{module}.{j}{leaf}"
    for j in range(EXTRA_FFNS)
    for name, module, leaf in (
        ("IN", "ffns", ".fc_in"),
        ("OUT", "ffns", ".fc_out"),
        ("NORM", "ffn_norms", ""),
    )
}
FFN_RULES = "".join(
    f"{LAYER}ffn.{j}.(intermediate.dense,output.dense,output.LayerNorm)  IN{j},OUT{j},NORM{j}\n"
    for j in range(EXTRA_FFNS)
)
LAYERS = f"""
    embeddings.embedding_transformation         EMBED_PROJECT
    {LAYER}attention.self.(query,key,value)     Q,K,V
    {LAYER}attention.output.(dense,LayerNorm)   ATTN_OUT,ATTN_NORM
    {LAYER}intermediate.dense                   FC_IN
    {LAYER}output.(dense,LayerNorm)             FC_OUT,FFN_NORM
    {LAYER}bottleneck.input.(dense,LayerNorm)   BOTTLENECK_IN,BOTTLENECK_IN_NORM
    {LAYER}bottleneck.attention.(dense,LayerNorm)   QK_BOTTLENECK,QK_BOTTLENECK_NORM
    {LAYER}output.bottleneck.(dense,LayerNorm)  BOTTLENECK_OUT,BOTTLENECK_OUT_NORM
"""
MLM = task(
    "kind: mlm, decoder_extension: true",
    """
    cls.predictions.transform.(dense,LayerNorm)         MLM_DENSE,MLM_NORM
    cls.predictions.decoder                             MLM_DECODER
    cls.predictions.decoder.bias|cls.predictions.bias   MLM_BIAS        tensor
    cls.predictions.dense                               MLM_EXTENSION   transpose
    """,
    fields=(
        Field("hidden_act", "head.activation", "relu", ACTIVATION),
        Field("layer_norm_eps", "head.transform_norm_eps", 1e-12),
        tie(True),
    ),
)
POOLED = ("none", "classifier", "multiple_choice")  # heads that read MobileBertPooler
NORMS = {"no_norm": {"kind": "affine"}, "layer_norm": {"kind": "layernorm", "eps": 1e-5}}


class MobileBertConverter(BertConverter, model_type="mobilebert", hf_prefix="MobileBert"):
    refused = {"ForNextSentencePrediction": BertConverter.refused["ForNextSentencePrediction"]}
    fixed = spec_parts(
        "embedding: {kind: factorized, norm: true, project: tokens}",
        "position: {kind: learned, offset: 0}, ffn: mlp",
        "attention: {kind: mha, fused_qkv: false, bias: true}",
    )
    fields = (
        *SIZES,
        *parse_fields(
            """
            max_position_embeddings         max_len
            hidden_dropout_prob             dropout                     0.0
            attention_probs_dropout_prob    attention_dropout           0.1
            type_vocab_size                 embedding.type_vocab_size   2
            embedding_size                  embedding.embedding_size    128
            trigram_input                   embedding.trigram           True
            num_feedforward_networks        block.n_ffn                 4
            hidden_act                      ffn.activation      relu    ACTIVATION
            """,
            ACTIVATION=ACTIVATION,
        ),
        *PAD,
    )
    tasks = {  # the pooled heads' `pooler` follows classifier_activation (adjust)
        **encoder_tasks("pooler.dense", MLM),
        "ForSequenceClassification": task(
            "kind: classifier, pooling: cls",
            "classifier  CLASSIFIER",
            base="pooler.dense  HEAD_POOLER",
            labels=True,
        ),
        "ForMultipleChoice": task(
            "kind: multiple_choice, pooling: cls",
            "classifier  CLASSIFIER",
            base="pooler.dense  HEAD_POOLER",
        ),
    }
    tensors = TensorTable(
        parse_rules(BERT_EMBEDDINGS + LAYERS + FFN_RULES, {**PATHS, **FFN_PATHS}),
        ("mobilebert.", ""),
        {"encoder": {}},
        (*BERT_BUFFERS, *POOLER, "cls.seq_relationship.weight", "cls.seq_relationship.bias"),
    )

    def base_table(self, spec: Mapping[str, Any] | None = None) -> TensorTable:
        """With use_bottleneck_attention, transformers still builds the q/k bottleneck of
        key_query_shared_bottleneck and never reads it: import leaves it out (export says
        key_query_shared_bottleneck false, so transformers builds none)."""
        assert self.tensors is not None
        if spec is None or spec.get("block", {}).get("attention_input") != "inner":
            return self.tensors
        unused = tuple(
            f"{LAYER}bottleneck.attention.{m}.{p}"
            for m in ("dense", "LayerNorm")
            for p in ("weight", "bias")
        )
        return replace(self.tensors, ignore=(*self.tensors.ignore, *unused))

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """The bottleneck switches as the block's inner_dim and attention_input, the heads'
        width (intra_bottleneck_size / heads), normalization_type as the norm, and
        classifier_activation as the pooler of the heads that read it."""
        d, heads = spec["d_model"], spec["n_heads"]
        kind = get(config, "normalization_type", "no_norm")
        eps = get(config, "layer_norm_eps", 1e-12)
        if kind not in NORMS:
            raise ConversionError(
                f"config.json normalization_type={kind!r}: only no_norm, layer_norm"
            )
        if kind == "layer_norm" and eps != 1e-5:  # transformers gives some norms torch's 1e-5
            raise ConversionError(
                f"config.json normalization_type='layer_norm' with layer_norm_eps={eps}: "
                "transformers builds the embedding's and each FFN output's LayerNorm with "
                "torch's eps 1e-5 and the others with layer_norm_eps; only 1e-5 is supported"
            )
        spec["norm"] = dict(NORMS[kind])
        embedding = spec["embedding"]
        if not embedding["trigram"] and embedding["embedding_size"] == d:
            raise ConversionError(
                "config.json trigram_input=false with embedding_size == hidden_size: "
                "transformers then holds an embedding_transformation it never applies"
            )
        block: dict[str, Any] = {"kind": "bottleneck", "n_ffn": spec.pop("block")["n_ffn"]}
        spec["block"] = block
        width = d
        if get(config, "use_bottleneck", True):
            width = get(config, "intra_bottleneck_size", 128)
            if get(config, "use_bottleneck_attention", False):
                block["attention_input"] = "inner"
            elif get(config, "key_query_shared_bottleneck", True):
                block["attention_input"] = "qk_bottleneck"
                spec["attention"]["value_width"] = d
            else:
                raise ConversionError(
                    "config.json use_bottleneck with neither key_query_shared_bottleneck nor "
                    "use_bottleneck_attention (q and k from the full-width input, the residual "
                    "from the bottleneck) is not supported"
                )
            block["inner_dim"] = width
        if width % heads:
            raise ConversionError(f"the attention width {width} is not divisible by {heads} heads")
        spec["head_dim"] = width // heads
        head = spec["head"]
        if head["kind"] == "mlm":
            head["width"] = d
        if head["kind"] in POOLED and not get(config, "classifier_activation", True):
            head["pooler"] = False  # the first token's state as it is

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """The block's bottleneck, the norm and the pooler as transformers' switches."""
        block, norm = spec["block"], spec["norm"]
        config["normalization_type"] = "no_norm" if norm["kind"] == "affine" else "layer_norm"
        config["use_bottleneck"] = block.get("inner_dim") is not None
        config["intra_bottleneck_size"] = block.get("inner_dim") or spec["d_model"]
        config["use_bottleneck_attention"] = block.get("attention_input") == "inner"
        config["key_query_shared_bottleneck"] = block.get("attention_input") == "qk_bottleneck"
        head = spec.get("head") or {}
        if head.get("kind") in POOLED:  # the pooler's dense + tanh, or the first token alone
            config["classifier_activation"] = head.get("pooler", True)
