"""DiffLlama: Llama's layout with differential attention (`diff_mha`): each layer's four
lambda vectors, lambda_init by depth (transformers' lambda_init_fn), the pairs' RMS norm at
`rms_norm_eps`."""

from __future__ import annotations

from archzoo.parts.converter import parse_fields, spec_parts

from .common import table
from .llama import ATTENTION_TENSORS, MLP_TENSORS, ROTARY_BUFFER, LlamaConverter

LAMBDA_TENSORS = """
        layers.{i}.self_attn.(lambda_q1,lambda_k1,lambda_q2,lambda_k2)  LAMBDA_Q1,LAMBDA_K1,LAMBDA_Q2,LAMBDA_K2  tensor
"""
NORM_EPS = "rms_norm_eps  norm.eps,attention.pair_norm_eps  1e-5"


class DiffLlamaConverter(LlamaConverter, model_type="diffllama", hf_prefix="DiffLlama"):
    fixed = {**LlamaConverter.fixed, **spec_parts("attention: {kind: diff_mha, fused_qkv: false}")}
    fields = (
        *(f for f in LlamaConverter.fields if f.hf not in ("rms_norm_eps", "mlp_bias")),
        *parse_fields(NORM_EPS),
        *parse_fields("lambda_std_dev  attention.lambda_std  0.1"),
    )
    tensors = table(
        ATTENTION_TENSORS + MLP_TENSORS + LAMBDA_TENSORS,
        prefixes=("model.", "transformer.", ""),
        ignore=ROTARY_BUFFER,
    )
