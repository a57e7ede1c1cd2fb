"""MiniMax-M2: Llama's layout with an RMSNorm over all queries and all keys (OLMo 2's), rotary
on `rotary_dim` of each head (halves), and Mixtral's SwiGLU experts in every layer, chosen by
sigmoid scores plus a per-expert correction bias, weighted by their renormalised scores."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import spec_parts

from .common import decoder_tasks, lm_task, table
from .experts import PerExpert
from .llama import ATTENTION_TENSORS, ROTARY_BUFFER, LlamaConverter
from .mixtral import MOE_TENSORS, ExpertsConverter, aux_loss_coef, aux_loss_config, moe_fields
from .qwen import QK_NORM_TENSORS
from .rope import rope_parameters


class MiniMaxM2Converter(
    ExpertsConverter, LlamaConverter, model_type="minimax_m2", hf_prefix="MiniMaxM2"
):
    per_expert = PerExpert.under("block_sparse_moe.experts.{e}", "w1", "w3", "w2")
    fixed = {
        **LlamaConverter.fixed,
        **spec_parts(
            "attention: {kind: mha, fused_qkv: false, qk_norm: full}",
            "ffn: {kind: moe, expert: glu, activation: swiglu, router: sigmoid, choice_bias: true,"
            " normalize: true, fp32_weights: true}",
        ),
    }
    fields = moe_fields(LlamaConverter.fields, "router_jitter_noise  ffn.jitter  0.0")
    tasks = {
        k: v
        for k, v in decoder_tasks("ForCausalLM", lm_task(False)).items()
        if k in ("Model", "ForCausalLM")
    }
    tensors = table(
        ATTENTION_TENSORS
        + QK_NORM_TENSORS
        + MOE_TENSORS
        + "layers.{i}.mlp.e_score_correction_bias|layers.{i}.block_sparse_moe.e_score_correction_bias"
        "    SCORE_BIAS  tensor\n",
        prefixes=("model.", ""),
        ignore=ROTARY_BUFFER,
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Rotary on rotary_dim of each head; the router loss."""
        rotary_dim = config.get("rotary_dim")
        if rotary_dim is not None and "partial_rotary_factor" not in config:
            config = {**config, "partial_rotary_factor": rotary_dim / spec["head_dim"]}
        spec["position"] = {"kind": "rotary", **rope_parameters(config)}
        aux_loss_coef(spec, config)

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        super().adjust_config(config, spec)
        aux_loss_config(config, spec)
