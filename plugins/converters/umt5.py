"""UMT5: T5 v1.1 with a relative bias table in every self-attention layer rather than one
per stack (t5_relative per_layer)."""

from __future__ import annotations

from archzoo.converter import spec_parts

from .common import table
from .t5 import T5Converter

UMT5_TENSORS = """
    shared|{s}.embed_tokens                             WORD    # one table, both stacks
    {s}.block.{i}.layer.0.SelfAttention.relative_attention_bias   POSITION_LAYER
    {s}.block.{i}.layer.0.SelfAttention.(q,k,v,o)       Q,K,V,ATTN_OUT
    {s}.block.{i}.layer.1.EncDecAttention.(q,k,v,o)     CROSS_Q,CROSS_K,CROSS_V,CROSS_OUT
    {s}.block.{i}.layer.(0,1,{ffn}).layer_norm          ATTN_NORM,CROSS_NORM,FFN_NORM
    {s}.block.{i}.layer.{ffn}.DenseReluDense.(wi,wo)    FC_IN,FC_OUT    # relu
    {s}.block.{i}.layer.{ffn}.DenseReluDense.(wi_0,wi_1,wo)     GATE,UP,DOWN    # gated
    {s}.final_layer_norm                                FINAL_NORM
"""


class UMT5Converter(T5Converter, model_type="umt5", hf_prefix="UMT5"):
    fixed = spec_parts(
        "max_len: 512, tie_embeddings: true, embedding: token",
        "position: {kind: t5_relative, per_layer: true}",
        "block: pre_ln, norm: rmsnorm",
        "attention: {kind: mha, fused_qkv: false, bias: false, scale: 1.0}",  # unscaled scores
    )
    tensors = table(
        UMT5_TENSORS,
        prefixes=("transformer.", ""),
        stacks={"encoder": {"s": "encoder", "ffn": "1"}, "decoder": {"s": "decoder", "ffn": "2"}},
    )
