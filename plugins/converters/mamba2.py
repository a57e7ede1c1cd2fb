"""Mamba 2 (state-spaces/mamba2-*, Mamba2ForCausalLM): every layer an RMSNorm and a Mamba 2
mixer around a residual, no FFN and no positions; a final RMSNorm and an LM head."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import ConversionError, Converter, Field, parse_fields, spec_parts

from .common import HEADLESS, PAD, integer_expand, lm_task, table

MAMBA2_TENSORS = """
        embeddings|embed_tokens                             WORD
        layers.{i}.norm                                     ATTN_NORM
        layers.{i}.mixer.(in_proj,conv1d,out_proj)          MIXER_IN,MIXER_CONV,MIXER_OUT
        layers.{i}.mixer.norm                               MIXER_NORM
        layers.{i}.mixer.A_log                              A_LOG       tensor
        layers.{i}.mixer.dt_bias                            DT_BIAS     tensor
        layers.{i}.mixer.D                                  SSM_D       tensor
        norm_f                                              FINAL_NORM
"""


class Mamba2Converter(Converter, model_type="mamba2", hf_prefix="Mamba2", family="decoder"):
    requires = {"hidden_act": "silu"}
    fixed = spec_parts(
        "dropout: 0.0, embedding: token, position: none, norm: rmsnorm",
        "block: {kind: pre_ln, ffn_norm: false}, ffn: none",
        "attention: {kind: mamba2}",
    )
    fields = (
        *parse_fields(
            """
            vocab_size                  vocab_size
            hidden_size                 d_model
            num_hidden_layers           n_layers
            num_heads                   n_heads
            head_dim                    head_dim,attention.head_dim     64
            state_size                  attention.state_size            128
            n_groups                    attention.n_groups              8
            conv_kernel                 attention.conv_kernel           4
            use_bias                    attention.bias                  False
            use_conv_bias               attention.conv_bias             True
            chunk_size                  attention.chunk_size            256
            layer_norm_epsilon          norm.eps,attention.norm_eps     1e-5
            """
        ),
        Field("expand", "attention.d_inner", 2),  # read and written by adjust
        *PAD,
    )
    tasks = {"Model": HEADLESS, "ForCausalLM": lm_task(False)}
    tensors = table(MAMBA2_TENSORS, prefixes=("backbone.", ""))

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """The mixer's width (expand x hidden_size), its step limits, and a context of 2^20
        tokens: Mamba has no position limit, so nothing should refuse a long input."""
        d_inner = int(config.get("expand", 2) * config["hidden_size"])
        heads, width = config["num_heads"], config.get("head_dim", 64)
        if heads * width != d_inner:
            raise ConversionError(
                f"config.json num_heads x head_dim = {heads} x {width} is not "
                f"expand x hidden_size = {d_inner}"
            )
        spec["attention"]["d_inner"] = d_inner
        low, high = (_number(v) for v in config.get("time_step_limit") or (0.0, math.inf))
        spec["attention"]["dt_min"] = low
        spec["attention"]["dt_max"] = None if math.isinf(high) else high
        spec.setdefault("max_len", 1 << 20)

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """The inverse of `adjust`: expand from the mixer's width, the step limits."""
        attention, d = spec["attention"], spec["d_model"]
        config["expand"] = integer_expand(attention["d_inner"], d, "Mamba2Config")
        low, high = attention["dt_min"], attention["dt_max"]
        config.update(time_step_limit(low, high))


def time_step_limit(low: float, high: float | None) -> dict[str, Any]:
    """config.json's time_step_limit for a mixer's (dt_min, dt_max): none for transformers'
    default (0, inf), else the pair (infinity as a float, which transformers writes out)."""
    if high is None and low == 0.0:
        return {}
    return {"time_step_limit": [low, math.inf if high is None else high]}


def _number(value: Any) -> float:
    """A float from config.json, where transformers writes infinity as {"__float__": ...}."""
    if isinstance(value, dict) and "__float__" in value:
        return float(value["__float__"])
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConversionError(f"config.json time_step_limit holds {value!r}, not a number")
    return float(value)


def read_hybrid_mixer(mixer: dict[str, Any], config: dict[str, Any], head_dim: Any) -> None:
    """A hybrid type's Mamba 2 mixer from its `mamba_*` keys (Bamba, Granite 4.0 hybrid):
    width mamba_expand x hidden_size, heads of `head_dim` ("auto": the width over
    mamba_n_heads) and the step limits."""
    d_inner = int(config.get("mamba_expand", 2) * config["hidden_size"])
    heads = config.get("mamba_n_heads", 128)
    width = d_inner // heads if head_dim in ("auto", None) else int(head_dim)
    if heads * width != d_inner:
        raise ConversionError(
            f"config.json mamba_n_heads x mamba_d_head = {heads} x {width} is not "
            f"mamba_expand x hidden_size = {d_inner}"
        )
    low, high = (_number(v) for v in config.get("time_step_limit") or (0.0, math.inf))
    mixer.update(d_inner=d_inner, head_dim=width, dt_min=low)
    mixer["dt_max"] = None if math.isinf(high) else high


def write_hybrid_mixer(config: dict[str, Any], mixer: Mapping[str, Any], d: int, what: str) -> None:
    """The inverse of `read_hybrid_mixer` (`what`: the config class, for the error)."""
    config["mamba_expand"] = integer_expand(mixer["d_inner"], d, what, "mamba_expand")
    config["mamba_n_heads"] = mixer["d_inner"] // mixer["head_dim"]
    config["mamba_d_head"] = mixer["head_dim"]
    config.pop("time_step_limit", None)
    config.update(time_step_limit(mixer["dt_min"], mixer["dt_max"]))
