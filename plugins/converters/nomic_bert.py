"""Nomic BERT (`nomic_bert`, nomic-embed-text): BERT's post-LN encoder and heads with rotary
positions in place of the position table, one fused q/k/v projection (`Wqkv`) and an output
projection without biases, a gated MLP without biases (`fc11` up, `fc12` gate, `fc2` down;
SwiGLU by default) and the embedding norm as `emb_ln` (the checkpoints' own names, which
transformers keeps when saving)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import Converter, Field, spec_parts

from .bert import POOLER, BertConverter, bert_fields, mlm_activation
from .common import encoder_tasks, mlm_task, table
from .gemma import GATED
from .rope import rope_config, rope_parameters

TASKS = ("Model", "ForMaskedLM", "ForSequenceClassification", "ForTokenClassification")


class NomicBertConverter(
    Converter, model_type="nomic_bert", hf_prefix="NomicBert", family="encoder"
):
    fixed = spec_parts(
        "block: post_ln, norm: layernorm, embedding: {kind: token, norm: true}",
        "attention: {kind: mha, fused_qkv: true, bias: false}, ffn: {kind: glu, bias: false}",
    )
    fields = (
        *(f for f in bert_fields(dropout=0.0, activation="silu") if f.hf != "hidden_act"),
        Field("hidden_act", "ffn.activation", "silu", GATED),
    )
    tasks = {  # BERT's, with the transform's norm as `layer_norm`
        **{k: v for k, v in BertConverter.tasks.items() if k in TASKS},
        "ForMaskedLM": encoder_tasks(
            "pooler.dense",
            mlm_task(
                "cls.predictions.",
                "transform.dense",
                "transform.layer_norm",
                mlm_activation("silu"),
            ),
        )["ForMaskedLM"],
    }
    tensors = table(
        """
        embeddings.word_embeddings              WORD
        embeddings.token_type_embeddings        TOKEN_TYPE
        emb_ln                                  EMBED_NORM
        encoder.layers.{i}.attn.Wqkv            QKV
        encoder.layers.{i}.attn.out_proj        ATTN_OUT
        encoder.layers.{i}.(norm1,norm2)        ATTN_NORM,FFN_NORM
        encoder.layers.{i}.mlp.(fc12,fc11,fc2)  GATE,UP,DOWN
        """,
        prefixes=("nomic_bert.", ""),
        stacks={"encoder": {}},
        ignore=POOLER,
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Rotary positions (NomicBertConfig's base where the config names none)."""
        spec["position"] = {"kind": "rotary", **rope_parameters({"rope_theta": 1000.0, **config})}

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        config.update(rope_config(spec["position"]))
