"""BERT (and RoBERTa, which differs in names and position offset): post-LN encoder, MLM head.

BERT's `position_embedding_type` `relative_key` / `relative_key_query` (transformers 4;
transformers 5 dropped them) is the `relative` position with one distance table per layer
(2 * max_position_embeddings - 1 rows, no clipping within max_len) and, for key_query, the
key's term too; the absolute table is then unused."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from archzoo.parts.converter import ConversionError, Converter, Field, get, parse_fields, spec_parts
from archzoo.parts.hf_tensors import TensorTable

from .common import (
    ACTIVATION,
    AS_DECODER,
    BERT_BUFFERS,
    BERT_EMBEDDINGS,
    PAD,
    SIZES,
    encoder_tasks,
    mlm_task,
    table,
    task,
)

# a BERT layer after its self-attention (DeBERTa keeps these names)
LAYER_OUTPUTS = """
    encoder.layer.{i}.attention.output.(dense,LayerNorm)  ATTN_OUT,ATTN_NORM
    encoder.layer.{i}.(intermediate.dense,output.dense)   FC_IN,FC_OUT
    encoder.layer.{i}.output.LayerNorm                    FFN_NORM
"""
LAYERS = (
    """
    encoder.layer.{i}.attention.self.(query,key,value)    QKV     fuse  # one GEMM, not three
    encoder.layer.{i}.attention.self.(query,key,value)    Q,K,V         # or separate ones
"""
    + LAYER_OUTPUTS
)
POOLER = ("pooler.dense.weight", "pooler.dense.bias")  # not part of an MLM model
# relative_key: each layer's distance rows, indexed by i - j (archzoo's by j - i)
DISTANCES = """
    encoder.layer.{i}.attention.self.distance_embedding   RELATIVE_LAYER  reverse_rows
"""
RELATIVE = {"relative_key": False, "relative_key_query": True}  # -> the key's term
# what a type without BERT's distance tables requires (one built on BERT's classes)
ABSOLUTE_ONLY = {"is_decoder": False, "position_embedding_type": "absolute"}


def bert_fields(
    *, dropout: float, activation: str, types: int = 2, eps: float = 1e-12
) -> tuple[Field, ...]:
    """BERT's config keys (ALBERT's and DeBERTa's too), with the defaults that differ."""
    return (
        *SIZES,
        *parse_fields(
            f"""
            max_position_embeddings         max_len
            hidden_dropout_prob             dropout                     {dropout}
            attention_probs_dropout_prob    attention_dropout           {dropout}
            type_vocab_size                 embedding.type_vocab_size   {types}
            layer_norm_eps                  norm.eps                    {eps}
            hidden_act                      ffn.activation      {activation}    ACTIVATION
            """,
            ACTIVATION=ACTIVATION,
        ),
        *PAD,
    )


def mlm_activation(default: str) -> Field:
    """The MLM transform's activation: the model's."""
    return Field("hidden_act", "head.activation", default, ACTIVATION)


class BertConverter(Converter, model_type="bert", hf_prefix="Bert", family="encoder"):
    requires = {"is_decoder": False}
    fixed = spec_parts(
        "block: post_ln, norm: layernorm, ffn: mlp",
        "embedding: {kind: token, norm: true}, position: {kind: learned, offset: 0}",
        "attention: {kind: mha, fused_qkv: true, bias: true}",
    )
    fields = bert_fields(dropout=0.1, activation="gelu")
    tasks = encoder_tasks(
        "pooler.dense",
        mlm_task(
            "cls.predictions.", "transform.dense", "transform.LayerNorm", mlm_activation("gelu")
        ),
    )
    refused = {
        "LMHeadModel": AS_DECODER,
        "ForNextSentencePrediction": "a next-sentence head alone: archzoo has no such head "
        "(ForPreTraining imports its masked-LM head and skips this one)",
    }
    tensors = table(
        BERT_EMBEDDINGS + LAYERS + DISTANCES,
        prefixes=("bert.", ""),
        stacks={"encoder": {}},
        ignore=(*BERT_BUFFERS, *POOLER, "cls.seq_relationship.weight", "cls.seq_relationship.bias"),
    )

    def base_table(self, spec: Mapping[str, Any] | None = None) -> TensorTable:
        """With relative positions, the absolute table transformers 4 still saved is unused."""
        assert self.tensors is not None
        if spec is None or spec.get("position", {}).get("kind") != "relative":
            return self.tensors
        unused = ("embeddings.position_embeddings.weight",)
        return replace(self.tensors, ignore=(*self.tensors.ignore, *unused))

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """`position_embedding_type`: absolute, or relative distances per layer."""
        kind = config.get("position_embedding_type") or "absolute"
        if kind == "absolute":
            return
        if kind not in RELATIVE:
            raise ConversionError(
                f"config.json position_embedding_type={kind!r} is not supported; "
                "supported: absolute, relative_key, relative_key_query"
            )
        spec["position"] = {
            "kind": "relative",
            "max_distance": spec["max_len"] - 1,  # 2 * max_len - 1 rows: every distance
            "per_layer": True,
            "key_term": RELATIVE[kind],
        }

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """The position as `position_embedding_type` (relative_key[_query] for distances
        per layer; export's round trip checks the table size and the layers)."""
        position = spec["position"]
        if position["kind"] != "relative":
            config["position_embedding_type"] = "absolute"
            return
        kinds = {v: k for k, v in RELATIVE.items()}
        config["position_embedding_type"] = kinds[bool(position.get("key_term"))]


class RobertaConverter(BertConverter, model_type="roberta", hf_prefix="Roberta"):
    requires = ABSOLUTE_ONLY
    refused = {"ForCausalLM": AS_DECODER}
    fixed = {  # positions counted over real tokens from padding_idx + 1, as HF numbers them
        **BertConverter.fixed,
        **spec_parts("position: {kind: learned, offset: 0, count: tokens}"),
    }
    tasks = encoder_tasks(
        "pooler.dense",
        mlm_task("lm_head.", "dense", "layer_norm", mlm_activation("gelu")),
        # RobertaClassificationHead: dense + tanh on <s> (no pretrained pooler), out_proj
        sequence=task(
            "kind: classifier, pooling: cls, pooler: true",
            "classifier.(dense,out_proj)  HEAD_POOLER,CLASSIFIER",
            labels=True,
        ),
    )
    tensors = table(
        BERT_EMBEDDINGS + LAYERS,
        prefixes=("roberta.", ""),
        stacks={"encoder": {}},
        ignore=(*BERT_BUFFERS, *POOLER),
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Positions start after padding_idx: the first pad_token_id + 1 rows are unused."""
        offset = get(config, "pad_token_id", 1) + 1
        spec["position"]["offset"] = offset
        spec["max_len"] -= offset

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """The position offset as padding_idx + 1, the table as max_len + offset rows."""
        offset = spec["position"].get("offset", 0)
        config["pad_token_id"] = offset - 1
        config["max_position_embeddings"] = spec["max_len"] + offset


class XLMRobertaConverter(RobertaConverter):
    """XLM-RoBERTa: RoBERTa's layout and tensor names with a 250k multilingual vocabulary."""

    model_type = "xlm-roberta"
    hf_prefix = "XLMRoberta"
