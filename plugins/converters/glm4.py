"""GLM-4-0414 (`glm4`): GLM's layout with a norm before and after each sublayer (sandwich)."""

from __future__ import annotations

from archzoo.parts.converter import spec_parts

from .common import table
from .glm import GATE_UP_TENSORS, GlmConverter
from .llama import ROTARY_BUFFER


class Glm4Converter(GlmConverter, model_type="glm4", hf_prefix="Glm4"):
    fixed = {**GlmConverter.fixed, **spec_parts("block: sandwich_ln")}
    tensors = table(
        """
        embed_tokens                            WORD
        layers.{i}.input_layernorm              ATTN_NORM
        layers.{i}.self_attn.(q_proj,k_proj,v_proj,o_proj)      Q,K,V,ATTN_OUT
        layers.{i}.post_self_attn_layernorm     ATTN_OUT_NORM
        layers.{i}.post_attention_layernorm     FFN_NORM
        layers.{i}.post_mlp_layernorm           FFN_OUT_NORM
        norm                                    FINAL_NORM
        """
        + GATE_UP_TENSORS,
        prefixes=("model.", ""),
        ignore=ROTARY_BUFFER,
    )
