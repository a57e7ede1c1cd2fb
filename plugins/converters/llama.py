"""Llama (and Mistral, which adds a sliding window): RMSNorm, rotary, GQA, SwiGLU, untied head."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import Converter, Field, parse_fields, spec_parts

from .common import PAD, SIZES, decoder_tasks, lm_task, table
from .rope import rope_config, rope_parameters

# Llama-layout tensors, shared by the types built on it (Mistral, Qwen, Gemma, OLMo 2, MoEs)
ATTENTION_TENSORS = """
        embed_tokens                            WORD
        layers.{i}.input_layernorm              ATTN_NORM
        layers.{i}.self_attn.(q_proj,k_proj,v_proj,o_proj)      Q,K,V,ATTN_OUT
        layers.{i}.post_attention_layernorm     FFN_NORM
        norm                                    FINAL_NORM
"""
ROTARY_BUFFER = ("layers.{i}.self_attn.rotary_emb.inv_freq",)  # saved by old versions
MLP_TENSORS = """
        layers.{i}.mlp.(gate_proj,up_proj,down_proj)            GATE,UP,DOWN
"""


class LlamaConverter(Converter, model_type="llama", hf_prefix="Llama", family="decoder"):
    # `pretraining_tp` (Meta's tensor-parallel degree) is not read: transformers 5 computes
    # the same full projections whatever it says
    requires = {"hidden_act": "silu"}
    fixed = spec_parts(
        "dropout: 0.0, embedding: token, block: pre_ln, norm: rmsnorm",
        "attention: {kind: mha, fused_qkv: false}",
        "ffn: {kind: glu, activation: swiglu}",
    )
    fields = (
        *SIZES,
        *parse_fields(
            """
            max_position_embeddings     max_len                             2048
            attention_dropout           attention_dropout                   0.0
            attention_bias              attention.bias,attention.out_bias   False
            mlp_bias                    ffn.bias                            False
            rms_norm_eps                norm.eps                            1e-6
            """
        ),
        Field("head_dim", "head_dim", lambda c: c["hidden_size"] // c["num_attention_heads"]),
        Field("num_key_value_heads", "attention.n_kv_heads", lambda c: c["num_attention_heads"]),
        *PAD,
    )
    tasks = decoder_tasks("ForCausalLM", lm_task(False), token="score")
    tensors = table(
        ATTENTION_TENSORS + MLP_TENSORS,
        prefixes=("model.", "transformer.", ""),  # transformer.: ...ForQuestionAnswering
        ignore=ROTARY_BUFFER,
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Rotary base and fraction, from transformers 4 or 5 keys."""
        spec["position"] = {"kind": "rotary", **rope_parameters(config)}

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        config.update(rope_config(spec["position"]))
