"""Jina Embeddings v3 (`jina_embeddings_v3`): XLM-RoBERTa's post-LN encoder and heads with
rotary positions (base 20,000 by default) in place of the position table, one fused biased
q/k/v projection (`Wqkv`), a GeLU MLP (`fc1`, `fc2`) and the embedding norm as `emb_ln`
(the checkpoints' own names, which transformers keeps when saving). Its task LoRA adapters
are not part of transformers' model."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import Converter, spec_parts

from .bert import POOLER, RobertaConverter, bert_fields
from .common import table
from .rope import rope_config, rope_parameters

TASKS = ("Model", "ForMaskedLM", "ForSequenceClassification", "ForTokenClassification")
TASKS += ("ForQuestionAnswering",)


class JinaEmbeddingsV3Converter(
    Converter, model_type="jina_embeddings_v3", hf_prefix="JinaEmbeddingsV3", family="encoder"
):
    fixed = spec_parts(
        "block: post_ln, norm: layernorm, ffn: mlp, embedding: {kind: token, norm: true}",
        "attention: {kind: mha, fused_qkv: true, bias: true}",
    )
    fields = bert_fields(dropout=0.1, activation="gelu", types=1, eps=1e-5)
    tasks = {k: v for k, v in RobertaConverter.tasks.items() if k in TASKS}
    tensors = table(
        """
        embeddings.word_embeddings              WORD
        embeddings.token_type_embeddings        TOKEN_TYPE
        emb_ln                                  EMBED_NORM
        encoder.layers.{i}.mixer.Wqkv           QKV
        encoder.layers.{i}.mixer.out_proj       ATTN_OUT
        encoder.layers.{i}.(norm1,norm2)        ATTN_NORM,FFN_NORM
        encoder.layers.{i}.mlp.(fc1,fc2)        FC_IN,FC_OUT
        """,
        prefixes=("roberta.", ""),
        stacks={"encoder": {}},
        ignore=POOLER,
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Rotary positions (JinaEmbeddingsV3Config's base where the config names none)."""
        spec["position"] = {"kind": "rotary", **rope_parameters({"rope_theta": 20000.0, **config})}

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        config.update(rope_config(spec["position"]))
