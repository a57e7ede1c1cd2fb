"""Mixtral: Mistral whose FFN is a mixture of 8 SwiGLU experts, top-2 softmax routing."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import Field, TensorSource, parse_fields, spec_parts
from archzoo.parts.hf_tensors import ZooNames

from .common import LM_HEAD, table
from .experts import PerExpert
from .llama import ATTENTION_TENSORS, LlamaConverter
from .mistral import MistralConverter

# the router and the stacked experts of a transformers-5 MoE block (gate_up: (E, 2F, D));
# per-expert checkpoints are stacked into these names first (experts.PerExpert)
MOE_TENSORS = """
        layers.{i}.mlp.gate|layers.{i}.block_sparse_moe.gate    ROUTER
        layers.{i}.mlp.experts.gate_up_proj     EXPERTS_IN      transpose   tensor
        layers.{i}.mlp.experts.down_proj        EXPERTS_OUT     transpose   tensor
"""


# expert count and experts per token (Qwen3-MoE spells the count `num_experts`)
MOE_FIELDS = parse_fields(
    """
    num_experts|num_local_experts   ffn.n_experts
    num_experts_per_tok             ffn.top_k
    """
)


# the routed SwiGLU experts of Mixtral and Qwen3-MoE
SWIGLU_EXPERTS = spec_parts(
    "ffn: {kind: moe, expert: glu, activation: swiglu, router: softmax_topk}"
)


def without_ffn_bias(fields: tuple) -> tuple:
    """A dense converter's fields less `mlp_bias -> ffn.bias` (experts have no bias switch)."""
    return tuple(f for f in fields if "ffn.bias" not in f.paths)


def moe_fields(dense: tuple[Field, ...], own: str) -> tuple[Field, ...]:
    """A dense type's fields for its MoE variant: less the FFN bias switch, plus the expert
    count and top-k, plus the variant's `own` table (parse_fields text)."""
    return (*without_ffn_bias(dense), *MOE_FIELDS, *parse_fields(own))


def aux_loss_coef(spec: dict[str, Any], config: dict[str, Any]) -> None:
    """transformers adds the router loss only with output_router_logits; so does the spec."""
    coef = float(config.get("router_aux_loss_coef") or 0.0)
    spec["ffn"]["aux_loss_coef"] = coef if config.get("output_router_logits") else 0.0


def aux_loss_config(config: dict[str, Any], spec: Mapping[str, Any]) -> None:
    """The inverse of `aux_loss_coef`: the router loss on (with its weight) or off."""
    coef = float(spec["ffn"].get("aux_loss_coef") or 0.0)
    config["output_router_logits"] = coef > 0
    if coef > 0:
        config["router_aux_loss_coef"] = coef


class ExpertsConverter:
    """Import/export through the table after (un)stacking per-expert checkpoint tensors."""

    per_expert: PerExpert

    def import_state(
        self, src: TensorSource, config: dict[str, Any], names: ZooNames, ctx: dict[str, Any]
    ) -> dict[str, Any]:
        self.per_expert.stack(src, self.tensors.prefix(src.names()))
        return super().import_state(src, config, names, ctx)

    def export_state(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return self.per_expert.split(super().export_state(*args, **kwargs))


class MixtralConverter(
    ExpertsConverter, MistralConverter, model_type="mixtral", hf_prefix="Mixtral"
):
    per_expert = PerExpert.under("block_sparse_moe.experts.{e}", "w1", "w3", "w2")
    fixed = {**LlamaConverter.fixed, **SWIGLU_EXPERTS}
    fields = moe_fields(MistralConverter.fields, "router_jitter_noise  ffn.jitter  0.0")
    tensors = table(ATTENTION_TENSORS + MOE_TENSORS, LM_HEAD, prefixes=("model.", ""))

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        super().adjust(spec, config)
        spec["ffn"] = {**spec["ffn"], "normalize": True, "fp32_weights": True}
        aux_loss_coef(spec, config)

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        super().adjust_config(config, spec)
        aux_loss_config(config, spec)
