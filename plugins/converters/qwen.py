"""Qwen2 (q/k/v biases), Qwen3 (per-head QK RMSNorm) and Qwen3-MoE (routed experts on some layers)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import spec_parts
from archzoo.specs.plan import layer_components, stack_config

from .common import LM_HEAD, table
from .experts import GATE_UP_DOWN_PROJ
from .llama import ATTENTION_TENSORS, MLP_TENSORS, LlamaConverter
from .mixtral import (
    MOE_TENSORS,
    SWIGLU_EXPERTS,
    ExpertsConverter,
    aux_loss_coef,
    aux_loss_config,
    moe_fields,
)

QK_NORM_TENSORS = """
        layers.{i}.self_attn.(q_norm,k_norm)    Q_NORM,K_NORM
"""


class FullAttentionQwen(LlamaConverter):
    """Qwen's rule for every version: full attention only (with use_sliding_window, layers
    from max_window_layers on would need a window); export writes it so."""

    requires = {**LlamaConverter.requires, "use_sliding_window": False}


class Qwen2Converter(FullAttentionQwen, model_type="qwen2", hf_prefix="Qwen2"):
    fixed = {
        **LlamaConverter.fixed,
        **spec_parts("attention: {kind: mha, fused_qkv: false, bias: true, out_bias: false}"),
    }
    fields = tuple(f for f in LlamaConverter.fields if f.hf != "attention_bias")


class Qwen3Converter(FullAttentionQwen, model_type="qwen3", hf_prefix="Qwen3"):
    fixed = {
        **LlamaConverter.fixed,
        **spec_parts("attention: {kind: mha, fused_qkv: false, qk_norm: head}"),
    }
    tensors = table(
        ATTENTION_TENSORS + MLP_TENSORS + QK_NORM_TENSORS, LM_HEAD, prefixes=("model.", "")
    )


class Qwen3MoeConverter(
    ExpertsConverter, Qwen3Converter, model_type="qwen3_moe", hf_prefix="Qwen3Moe"
):
    per_expert = GATE_UP_DOWN_PROJ
    fixed = {**Qwen3Converter.fixed, **SWIGLU_EXPERTS}
    fields = moe_fields(
        LlamaConverter.fields,
        """
        moe_intermediate_size       ffn.d_expert
        norm_topk_prob              ffn.normalize       False
        """,
    )
    tensors = table(
        ATTENTION_TENSORS + MLP_TENSORS + QK_NORM_TENSORS + MOE_TENSORS,
        LM_HEAD,
        prefixes=("model.", ""),
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        super().adjust(spec, config)
        aux_loss_coef(spec, config)
        step = int(config.get("decoder_sparse_step") or 1)
        dense_only = set(config.get("mlp_only_layers") or ())
        n = spec["n_layers"]
        dense = [i for i in range(n) if i in dense_only or (i + 1) % step != 0]
        if dense:  # these layers keep a dense SwiGLU of intermediate_size
            spec["layers"] = [{"select": dense, "ffn": {"kind": "glu", "activation": "swiglu"}}]

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """Layers with a dense SwiGLU as `mlp_only_layers` (every other layer routed)."""
        super().adjust_config(config, spec)
        aux_loss_config(config, spec)
        layers = layer_components(stack_config(dict(spec), "decoder"))
        config["decoder_sparse_step"] = 1
        config["mlp_only_layers"] = [i for i, c in enumerate(layers) if c["ffn"]["kind"] != "moe"]
