"""OLMo 2: Llama weights with norms after each sublayer (before the residual add) and a
QK RMSNorm over all heads at once. Its RMSNorm scales in fp32 before rounding and its rotary
runs in fp32 (cos/sin never rounded), so bf16 weights give transformers' bits."""

from __future__ import annotations

from typing import Any

from archzoo.parts.converter import spec_parts

from .common import table
from .llama import LlamaConverter
from .qwen import QK_NORM_TENSORS


class Olmo2Converter(LlamaConverter, model_type="olmo2", hf_prefix="Olmo2"):
    fixed = {
        **LlamaConverter.fixed,
        **spec_parts(
            "block: res_post_ln, norm: {kind: rmsnorm, scale_fp32: true}",
            "attention: {kind: mha, fused_qkv: false, qk_norm: full}",
        ),
    }
    tensors = table(
        """
        embed_tokens                            WORD
        layers.{i}.self_attn.(q_proj,k_proj,v_proj,o_proj)      Q,K,V,ATTN_OUT
        layers.{i}.post_attention_layernorm     ATTN_NORM
        layers.{i}.mlp.(gate_proj,up_proj,down_proj)            GATE,UP,DOWN
        layers.{i}.post_feedforward_layernorm   FFN_NORM
        norm                                    FINAL_NORM
        """
        + QK_NORM_TENSORS,
        prefixes=("model.", ""),
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Llama's rotary, rotated in float32 and rounded once (transformers' Olmo2 rotary)."""
        super().adjust(spec, config)
        spec["position"]["rotate_fp32"] = True
