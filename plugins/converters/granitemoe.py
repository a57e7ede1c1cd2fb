"""Granite MoE (IBM, 3.x): Granite's four multipliers with the FFN replaced by SwiGLU experts
of intermediate_size, chosen by top-k logits and weighted by a softmax over those k
(block_sparse_moe.input_linear holds each expert's [gate | up], output_linear its down)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from archzoo.parts.converter import parse_fields, spec_parts

from .common import table
from .granite import GraniteConverter
from .llama import ATTENTION_TENSORS, ROTARY_BUFFER
from .mixtral import aux_loss_coef, aux_loss_config, moe_fields

EXPERT_TENSORS = """
        layers.{i}.block_sparse_moe.router.layer                ROUTER
        layers.{i}.block_sparse_moe.input_linear.weight         EXPERTS_IN      transpose   tensor
        layers.{i}.block_sparse_moe.output_linear.weight        EXPERTS_OUT     transpose   tensor
"""


class GraniteMoeConverter(GraniteConverter, model_type="granitemoe", hf_prefix="GraniteMoe"):
    fixed = {
        **GraniteConverter.fixed,
        **spec_parts(
            "ffn: {kind: moe, expert: glu, activation: swiglu, router: topk_softmax,"
            " router_fp32: true}"
        ),
    }
    fields = tuple(  # its expert count is spelled num_local_experts only (no attribute_map)
        replace(f, hf="num_local_experts") if "num_local_experts" in f.hf else f
        for f in moe_fields(GraniteConverter.fields, "")
    )
    tensors = table(
        ATTENTION_TENSORS + EXPERT_TENSORS, prefixes=("model.", ""), ignore=ROTARY_BUFFER
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        super().adjust(spec, config)
        aux_loss_coef(spec, config)

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        super().adjust_config(config, spec)
        aux_loss_config(config, spec)


class GraniteMoeSharedConverter(
    GraniteMoeConverter, model_type="granitemoeshared", hf_prefix="GraniteMoeShared"
):
    """Granite MoE plus a shared SwiGLU MLP every token passes through (shared_mlp:
    input_linear holds [gate | up], shared_intermediate_size wide); 0 wide: none."""

    fields = (
        *GraniteMoeConverter.fields,
        *parse_fields("shared_intermediate_size  ffn.d_shared  0"),
    )
    tensors = table(
        ATTENTION_TENSORS
        + EXPERT_TENSORS
        + """
        layers.{i}.shared_mlp.input_linear                      SHARED_UP
        layers.{i}.shared_mlp.output_linear                     SHARED_DOWN
        """,
        prefixes=("model.", ""),
        ignore=ROTARY_BUFFER,
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Granite MoE's parts, and one shared expert where shared_intermediate_size > 0."""
        super().adjust(spec, config)
        width = spec["ffn"].pop("d_shared") or 0
        if width:
            spec["ffn"].update(n_shared=1, d_shared=width)

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        super().adjust_config(config, spec)
        ffn = spec["ffn"]
        shared = ffn.get("n_shared") and ffn.get("d_shared")
        config["shared_intermediate_size"] = shared or 0
