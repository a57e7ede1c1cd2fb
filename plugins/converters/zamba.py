"""Zamba (v1, Zyphra, 2024): Mamba (v1) layers whose mixer splits into `n_mamba_heads` heads,
each with its own x_proj and dt_proj (mamba `heads`); on the `hybrid` layers of
`layers_block_type` one transformer block shared by all of them (no positions, no adapters)
reads [x | embeddings], and its output, through the layer's own `linear`, joins the Mamba
input before its norm (attention `shared_transformer`, as Zamba 2's). in_proj's rows
alternate x and gate per channel."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import ConversionError, Converter, Field, parse_fields, spec_parts
from archzoo.parts.hf_tensors import TensorTable, parse_rules

from .common import ACTIVATION, PAD, PATHS, decoder_tasks, integer_expand, lm_task
from .zamba2 import HYBRID, KIND, hybrid_layers

HEADS = (
    "(x_proj_weight,dt_proj_weight,dt_proj_bias,A_log,D)  {0}X,{0}DT_W,{0}DT_B,{0}A_LOG,{0}SSM_D"
)
ZAMBA_TENSORS = f"""
    embed_tokens                                    WORD
    layers.{{i}}.input_layernorm                    ATTN_NORM
    layers.{{i}}.mamba.in_proj                      MIXER_IN    rows_deinterleaved
    layers.{{i}}.mamba.(conv1d,out_proj)            MIXER_CONV,MIXER_OUT
    layers.{{i}}.mamba.{HEADS.format("")}           tensor
    layers.{{i}}.mamba_decoder.input_layernorm      HYBRID_NORM
    layers.{{i}}.mamba_decoder.mamba.in_proj        HYBRID_MIXER_IN     rows_deinterleaved
    layers.{{i}}.mamba_decoder.mamba.(conv1d,out_proj)  HYBRID_MIXER_CONV,HYBRID_MIXER_OUT
    layers.{{i}}.mamba_decoder.mamba.{HEADS.format("HYBRID_")}  tensor
    layers.{{i}}.linear                             SHARED_PROJ
    layers.{{i}}.shared_transf.input_layernorm      SHARED_IN_NORM
    layers.{{i}}.shared_transf.self_attn.(q_proj,k_proj,v_proj,o_proj)  SHARED_Q,SHARED_K,SHARED_V,SHARED_OUT
    layers.{{i}}.shared_transf.pre_ff_layernorm     SHARED_FFN_NORM
    layers.{{i}}.shared_transf.feed_forward.(gate_proj,up_proj,down_proj)  SHARED_GATE,SHARED_UP,SHARED_DOWN
    final_layernorm                                 FINAL_NORM
"""  # noqa: E501
# the per-head tensors, whole: (H, R + 2N, P), (H, P, R) and (H, P)
OWN = {"X": "x_proj.weight", "DT_W": "dt_proj.weight", "DT_B": "dt_proj.bias"}
OWN = {k: PATHS["BLOCK"] + "attention." + v for k, v in OWN.items()}
OWN.update({f"HYBRID_{k}": v.replace("attention.", "attention.mixer.") for k, v in OWN.items()})
GATES = {"gelu": "geglu", "gelu_tanh": "geglu_tanh", "silu": "swiglu", "relu": "reglu"}
ACTS = {"geglu": "gelu", "geglu_tanh": "gelu_pytorch_tanh", "swiglu": "silu", "reglu": "relu"}


class ZambaConverter(Converter, model_type="zamba", hf_prefix="Zamba", family="decoder"):
    requires = {"hidden_mamba_act": "silu"}
    fixed = spec_parts(
        "dropout: 0.0, embedding: token, position: none, norm: rmsnorm, ffn: none",
        "block: {kind: pre_ln, ffn_norm: false}",
    )
    fields = (
        *parse_fields(
            """
            vocab_size                  vocab_size                  32000
            hidden_size                 d_model                     3712
            num_hidden_layers           n_layers                    76
            num_attention_heads         n_heads                     16
            intermediate_size           d_ff                        14848
            max_position_embeddings     max_len                     4096
            attention_dropout           attention_dropout           0.0
            rms_norm_eps                norm.eps                    1e-5
            """
        ),
        Field(  # the shared attention's heads: 2 x hidden_size wide unless stated
            "attention_head_dim|head_dim",
            "head_dim",
            lambda c: 2 * c.get("hidden_size", 3712) // c.get("num_attention_heads", 16),
        ),
        *PAD,
    )
    tasks = {
        k: v
        for k, v in decoder_tasks("ForCausalLM", lm_task(True)).items()
        if k in ("Model", "ForCausalLM", "ForSequenceClassification")
    }
    tensors = TensorTable(parse_rules(ZAMBA_TENSORS, {**PATHS, **HYBRID, **OWN}), ("model.", ""))

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """The multi-head Mamba of every layer, the one shared block on the hybrid layers."""
        get, hidden = config.get, spec["d_model"]
        d_inner, heads = int(get("mamba_expand", 2) * hidden), get("n_mamba_heads", 2)
        if get("attention_hidden_size") not in (None, 2 * hidden):
            raise ConversionError(
                f"config.json attention_hidden_size {get('attention_hidden_size')}: the shared "
                f"block reads [x | embeddings], 2 x hidden_size = {2 * hidden} wide"
            )
        if d_inner % heads:
            raise ConversionError(
                f"config.json n_mamba_heads {heads} does not divide mamba_expand x hidden_size "
                f"= {d_inner}"
            )
        rank = get("mamba_dt_rank", "auto")
        mixer = {
            "kind": "mamba",
            "d_inner": d_inner,
            "heads": heads,
            "state_size": get("mamba_d_state", 16),
            "dt_rank": math.ceil(hidden / 16) if rank == "auto" else int(rank),
            "conv_kernel": get("mamba_d_conv", 4),
            "conv_bias": bool(get("mamba_conv_bias", True)),
            "bias": bool(get("mamba_proj_bias", False)),
        }
        spec["attention"] = mixer
        act = ACTIVATION.read(get("hidden_act", "gelu"), "hidden_act")
        if act not in GATES:
            raise ConversionError(f"config.json hidden_act={act!r} has no gated FFN in archzoo")
        n, period, offset = (
            spec["n_layers"],
            get("attn_layer_period", 6),
            get("attn_layer_offset", 4),
        )
        rest = ["hybrid" if j % period == offset else "mamba" for j in range(n - 3)]
        types = get("layers_block_type") or ["mamba", "mamba", "hybrid", *rest]  # ZambaConfig's
        if len(types) != n:
            raise ConversionError(f"config.json layers_block_type has {len(types)} of {n} layers")
        shared = {
            "kind": KIND,
            "mixer": mixer,
            "n_kv_heads": get("num_key_value_heads") or spec["n_heads"],
            "scale": (spec["head_dim"] / 2) ** -0.5,  # transformers' sqrt(head_dim / 2)
            "d_ff": spec["d_ff"],
            "activation": GATES[act],
        }
        hybrid = [j for j, t in enumerate(types) if t == "hybrid"]
        block = {"kind": "pre_ln", "attention_norm": False, "ffn_norm": False}
        spec["layers"] = [{"select": hybrid, "block": block, "attention": shared}] if hybrid else []

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """The inverse of `adjust`."""
        mixer, d = spec["attention"], spec["d_model"]
        config.update(
            mamba_expand=integer_expand(
                mixer["d_inner"] or 2 * d, d, "ZambaConfig", "mamba_expand"
            ),
            n_mamba_heads=mixer["heads"],
            mamba_d_state=mixer["state_size"],
            mamba_dt_rank=mixer["dt_rank"] or math.ceil(d / 16),
            mamba_d_conv=mixer["conv_kernel"],
            mamba_conv_bias=mixer["conv_bias"],
            mamba_proj_bias=mixer["bias"],
            layers_block_type=["linear_attention"] * spec["n_layers"],
        )
        for j, att in hybrid_layers(spec):
            config["layers_block_type"][j] = "hybrid"
            config["num_key_value_heads"] = att["n_kv_heads"] or spec["n_heads"]
            config["hidden_act"] = ACTS[att["activation"]]
