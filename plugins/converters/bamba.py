"""Bamba (IBM, 2024): Mamba 2 layers and, on `attn_layer_indices`, Llama attention (GQA,
rotary on half of each head); every layer ends with a SwiGLU FFN. Pre-LN RMSNorm blocks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import ConversionError, Field, parse_fields, spec_parts
from archzoo.specs.plan import layer_components, stack_config

from .common import HEADLESS, PAD, SIZES, lm_task, table
from .llama import LlamaConverter
from .mamba2 import read_hybrid_mixer, write_hybrid_mixer

BAMBA_TENSORS = """
        embed_tokens                                            WORD
        layers.{i}.input_layernorm                              ATTN_NORM
        layers.{i}.self_attn.(q_proj,k_proj,v_proj,o_proj)      Q,K,V,ATTN_OUT
        layers.{i}.mamba.(in_proj,conv1d,out_proj)              MIXER_IN,MIXER_CONV,MIXER_OUT
        layers.{i}.mamba.norm                                   MIXER_NORM
        layers.{i}.mamba.A_log                                  A_LOG       tensor
        layers.{i}.mamba.dt_bias                                DT_BIAS     tensor
        layers.{i}.mamba.D                                      SSM_D       tensor
        layers.{i}.pre_ff_layernorm                             FFN_NORM
        layers.{i}.feed_forward.(gate_proj,up_proj,down_proj)   GATE,UP,DOWN
        final_layernorm                                         FINAL_NORM
"""


# the Mamba 2 mixer's keys of the hybrid types (Bamba, Granite 4.0 hybrid)
MAMBA_KEYS = """
            mamba_d_state               attention.state_size            256
            mamba_n_groups              attention.n_groups              1
            mamba_d_conv                attention.conv_kernel           4
            mamba_conv_bias             attention.conv_bias             True
            mamba_proj_bias             attention.bias                  False
            mamba_chunk_size            attention.chunk_size            256
"""


class BambaConverter(LlamaConverter, model_type="bamba", hf_prefix="Bamba"):
    requires = {"hidden_act": "silu"}
    fixed = spec_parts(
        "dropout: 0.0, embedding: token, block: pre_ln, norm: rmsnorm",
        "attention: {kind: mamba2}",
        "ffn: {kind: glu, activation: swiglu}",
    )
    fields = (
        *SIZES,
        *parse_fields(
            """
            max_position_embeddings     max_len                         262144
            attention_dropout           attention_dropout               0.0
            mlp_bias                    ffn.bias                        False
            rms_norm_eps                norm.eps,attention.norm_eps     1e-5
            mamba_d_head                attention.head_dim              64
            """
            + MAMBA_KEYS
        ),
        Field("head_dim", "head_dim", lambda c: c["hidden_size"] // c["num_attention_heads"]),
        Field("mamba_expand", "attention.d_inner", 2),  # read and written by adjust
        *PAD,
    )
    tasks = {"Model": HEADLESS, "ForCausalLM": lm_task(False)}
    tensors = table(BAMBA_TENSORS, prefixes=("model.", ""))

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Rotary (half of each head), the mixer's width and step limits, and attention on
        `attn_layer_indices`."""
        super().adjust(spec, config)
        read_hybrid_mixer(spec["attention"], config, spec["attention"]["head_dim"])
        attention = {
            "kind": "mha",
            "fused_qkv": False,
            "bias": bool(config.get("attention_bias", False)),
            "n_kv_heads": config.get("num_key_value_heads") or config["num_attention_heads"],
        }
        indices = sorted(config.get("attn_layer_indices") or ())
        if any(not 0 <= i < spec["n_layers"] for i in indices):
            raise ConversionError(
                f"config.json attn_layer_indices={indices} name layers outside 0..{spec['n_layers'] - 1}"
            )
        if indices:
            spec["layers"] = [{"select": indices, "attention": attention}]

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """The inverse of `adjust`."""
        super().adjust_config(config, spec)
        write_hybrid_mixer(config, spec["attention"], spec["d_model"], "BambaConfig")
        layers = [c["attention"] for c in layer_components(stack_config(dict(spec), "decoder"))]
        config["attn_layer_indices"] = [i for i, a in enumerate(layers) if a["kind"] == "mha"]
        att = next((a for a in layers if a["kind"] == "mha"), None)
        config["num_key_value_heads"] = att["n_kv_heads"] if att else spec["n_heads"]
        config["attention_bias"] = bool(att["bias"]) if att else False
