"""SqueezeBERT (Iandola et al., 2020): BERT's post-LN encoder, embeddings and heads whose
q/k/v, attention-output, intermediate and output projections are 1x1 convolutions in groups
(4, 4, 4, 1, 4, 4 by default): block-diagonal linear maps, the `*_groups` options of the
attention's projections and the MLP. transformers runs them on (B, C, T) features; the
numbers are the same as (B, T, C) linear maps. Every transformers class of the type holds
the pooler, which only the sequence and multiple-choice heads read: import leaves it out of
the others, export writes it as zeros there (no output of theirs reads it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from archzoo.parts.converter import ConversionError, parse_fields, spec_parts

from .bert import POOLER, BertConverter, bert_fields, mlm_activation
from .common import BERT_BUFFERS, BERT_EMBEDDINGS, encoder_tasks, mlm_task, table

GROUPS = parse_fields(
    """
    q_groups                attention.q_groups      4
    k_groups                attention.k_groups      4
    v_groups                attention.v_groups      4
    post_attention_groups   attention.out_groups    1
    intermediate_groups     ffn.in_groups           4
    output_groups           ffn.out_groups          4
    """
)


class SqueezeBertConverter(BertConverter, model_type="squeezebert", hf_prefix="SqueezeBert"):
    requires: dict[str, Any] = {}
    refused: dict[str, str] = {}
    fixed = {
        **BertConverter.fixed,
        **spec_parts("attention: {kind: mha, fused_qkv: false, bias: true}"),
    }
    fields = (*bert_fields(dropout=0.1, activation="gelu"), *GROUPS)
    tasks = encoder_tasks(
        "pooler.dense",
        mlm_task(
            "cls.predictions.", "transform.dense", "transform.LayerNorm", mlm_activation("gelu")
        ),
    )
    tensors = table(
        BERT_EMBEDDINGS
        + """
        encoder.layers.{i}.attention.(query,key,value)      Q,K,V       kernel1
        encoder.layers.{i}.post_attention.conv1d            ATTN_OUT    kernel1
        encoder.layers.{i}.post_attention.layernorm         ATTN_NORM
        encoder.layers.{i}.(intermediate,output).conv1d     FC_IN,FC_OUT    kernel1
        encoder.layers.{i}.output.layernorm                 FFN_NORM
        """,
        prefixes=("transformer.", ""),
        stacks={"encoder": {}},
        ignore=(*BERT_BUFFERS, *POOLER),
    )

    def export_state(
        self,
        state: Mapping[str, Tensor],
        names: Any,
        ctx: dict[str, Any],
        prefix: str | None = None,
        task: str | None = None,
    ) -> dict[str, Tensor]:
        """The table's tensors, plus a zero pooler where the head does not read it."""
        task = task or self.default_task
        prefix = self.export_prefix(task) if prefix is None else prefix
        out = super().export_state(state, names, ctx, prefix, task)
        d, dtype = ctx["d_model"], next(iter(out.values())).dtype
        for name, shape in zip(POOLER, ((d, d), (d,)), strict=True):
            out.setdefault(prefix + name, torch.zeros(shape, dtype=dtype))
        return out

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """The token table is d_model wide (transformers asserts embedding_size ==
        hidden_size)."""
        width = config.get("embedding_size", spec["d_model"])
        if width != spec["d_model"]:
            raise ConversionError(
                f"config.json embedding_size={width} differs from hidden_size="
                f"{spec['d_model']}; SqueezeBERT needs them equal"
            )

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """embedding_size as d_model."""
        config["embedding_size"] = spec["d_model"]
