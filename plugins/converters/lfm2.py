"""LFM2 (Liquid AI): a hybrid of gated short convolutions and GQA attention with per-head
QK RMSNorm, picked per layer by `layer_types` ("conv" / "full_attention"); pre-LN RMSNorm
blocks with a SwiGLU FFN whose width transformers may shrink (`block_auto_adjust_ff_dim`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import Field, parse_fields, spec_parts
from archzoo.specs.plan import layer_components, stack_config

from .common import HEADLESS, PAD, SIZES, layer_types, lm_task, table
from .llama import LlamaConverter

LFM2_TENSORS = """
        embed_tokens                                            WORD
        layers.{i}.operator_norm                                ATTN_NORM
        layers.{i}.self_attn.(q_proj,k_proj,v_proj,out_proj)    Q,K,V,ATTN_OUT
        layers.{i}.self_attn.(q_layernorm,k_layernorm)          Q_NORM,K_NORM
        layers.{i}.conv.(in_proj,conv,out_proj)                 MIXER_IN,MIXER_CONV,MIXER_OUT
        layers.{i}.ffn_norm                                     FFN_NORM
        layers.{i}.feed_forward.(w1,w3,w2)                      GATE,UP,DOWN
        embedding_norm                                          FINAL_NORM
"""
LAYER_TYPES = ("conv", "full_attention")


def lfm2_ffn_width(config: dict[str, Any]) -> int:
    """The SwiGLU width transformers builds: intermediate_size, or with auto-adjust 2/3 of
    it, times block_ffn_dim_multiplier, rounded up to block_multiple_of."""
    width = config["intermediate_size"]
    if not config.get("block_auto_adjust_ff_dim", True):
        return width
    width = int(2 * width / 3)
    multiplier = config.get("block_ffn_dim_multiplier", 1.0)
    if multiplier is not None:
        width = int(multiplier * width)
        step = config.get("block_multiple_of", 256)
        width = step * ((width + step - 1) // step)
    return width


def default_kinds(config: Mapping[str, Any], n: int) -> list[str]:
    """Older configs' kinds: the attention layers' indices `full_attn_idxs` (all, without)."""
    full = config.get("full_attn_idxs")
    full = range(n) if full is None else full
    return ["full_attention" if i in full else "conv" for i in range(n)]


class Lfm2Converter(LlamaConverter, model_type="lfm2", hf_prefix="Lfm2"):
    requires = {}
    fixed = spec_parts(
        "dropout: 0.0, embedding: token, block: pre_ln, norm: rmsnorm",
        "attention: {kind: short_conv}",
        "ffn: {kind: glu, activation: swiglu}",
    )
    fields = (
        *SIZES,
        *parse_fields(
            """
            max_position_embeddings     max_len                 128000
            norm_eps                    norm.eps                1e-5
            conv_bias                   attention.bias          False
            conv_L_cache                attention.conv_kernel   3
            """
        ),
        Field("head_dim", "head_dim", lambda c: c["hidden_size"] // c["num_attention_heads"]),
        *PAD,
    )
    tasks = {"Model": HEADLESS, "ForCausalLM": lm_task(True)}
    tensors = table(LFM2_TENSORS, prefixes=("model.", ""))

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Rotary, the FFN width transformers builds, and attention on the
        `full_attention` layers (GQA, per-head QK RMSNorm, no biases)."""
        super().adjust(spec, config)
        spec["d_ff"] = lfm2_ffn_width(config)
        n = spec["n_layers"]
        kinds = layer_types(config, n, LAYER_TYPES, default_kinds)
        attention = {
            "kind": "mha",
            "fused_qkv": False,
            "bias": False,
            "qk_norm": "head",
            "n_kv_heads": config.get("num_key_value_heads") or config["num_attention_heads"],
        }
        full = [i for i, kind in enumerate(kinds) if kind == "full_attention"]
        if full:
            spec["layers"] = [{"select": full, "attention": attention}]

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """The inverse of `adjust`: `layer_types`, the GQA heads and the FFN width as is."""
        super().adjust_config(config, spec)
        layers = [c["attention"] for c in layer_components(stack_config(dict(spec), "decoder"))]
        config["layer_types"] = ["full_attention" if a["kind"] == "mha" else "conv" for a in layers]
        heads = next((a["n_kv_heads"] for a in layers if a["kind"] == "mha"), None)
        config["num_key_value_heads"] = heads or spec["n_heads"]
        config["block_auto_adjust_ff_dim"] = False
