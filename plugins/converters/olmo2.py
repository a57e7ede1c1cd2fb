"""OLMo 2: Llama weights with norms after each sublayer (before the residual add) and a
QK RMSNorm over all heads at once."""

from __future__ import annotations

from archzoo.converter import spec_parts

from .common import table
from .llama import LlamaConverter
from .qwen import QK_NORM_TENSORS


class Olmo2Converter(LlamaConverter, model_type="olmo2", hf_prefix="Olmo2"):
    fixed = {
        **LlamaConverter.fixed,
        **spec_parts(
            "block: res_post_ln", "attention: {kind: mha, fused_qkv: false, qk_norm: full}"
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
