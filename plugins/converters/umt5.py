"""UMT5: T5 v1.1 with a relative bias table in every self-attention layer rather than one
per stack (t5_relative per_layer)."""

from __future__ import annotations

from archzoo.parts.converter import spec_parts

from .t5 import T5Converter, t5_table


class UMT5Converter(T5Converter, model_type="umt5", hf_prefix="UMT5"):
    fixed = spec_parts(
        "max_len: 512, tie_embeddings: true, embedding: token",
        "position: {kind: t5_relative, per_layer: true}",
        "block: pre_ln, norm: rmsnorm",
        "attention: {kind: mha, fused_qkv: false, bias: false, scale: 1.0}",  # unscaled scores
    )
    tensors = t5_table(
        "{s}.block.{i}.layer.0.SelfAttention.relative_attention_bias  POSITION_LAYER"
    )
