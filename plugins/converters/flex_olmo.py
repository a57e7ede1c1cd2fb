"""FlexOlmo: OLMo 2's layer (norms after each sublayer, before the residual add; one QK
RMSNorm over all heads, scaled in fp32; rotary in fp32) around OLMoE's softmax-routed SwiGLU
experts in every layer (top-k weights renormalised only with norm_topk_prob)."""

from __future__ import annotations

from typing import Any

from archzoo.parts.converter import spec_parts

from .common import LM_HEAD, table
from .mixtral import MOE_TENSORS
from .olmoe import OlmoeConverter
from .qwen import QK_NORM_TENSORS


class FlexOlmoConverter(OlmoeConverter, model_type="flex_olmo", hf_prefix="FlexOlmo"):
    fixed = {
        **OlmoeConverter.fixed,
        **spec_parts("block: res_post_ln, norm: {kind: rmsnorm, scale_fp32: true}"),
    }
    tensors = table(
        """
        embed_tokens                            WORD
        layers.{i}.self_attn.(q_proj,k_proj,v_proj,o_proj)      Q,K,V,ATTN_OUT
        layers.{i}.post_attention_layernorm     ATTN_NORM
        layers.{i}.post_feedforward_layernorm   FFN_NORM
        norm                                    FINAL_NORM
        """
        + QK_NORM_TENSORS
        + MOE_TENSORS,
        LM_HEAD,
        prefixes=("model.", ""),
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """OLMo 2's rotary: rotated in float32 and rounded once."""
        super().adjust(spec, config)
        spec["position"]["rotate_fp32"] = True
