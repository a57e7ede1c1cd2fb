"""Mamba (state-spaces/mamba-*-hf, MambaForCausalLM): every layer an RMSNorm and a Mamba (v1
selective scan) mixer around a residual, no FFN and no positions; a final RMSNorm and an LM
head tied to the embedding by default. Falcon-Mamba is this layout with plain RMS norms on
dt, B and C (an alias in aliases.py)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import Converter, Field, parse_fields, spec_parts

from .common import HEADLESS, PAD, integer_expand, lm_task, table

MAMBA_TENSORS = """
        embeddings|embedding                                WORD
        layers.{i}.norm                                     ATTN_NORM
        layers.{i}.mixer.(in_proj,conv1d,out_proj)          MIXER_IN,MIXER_CONV,MIXER_OUT
        layers.{i}.mixer.(x_proj,dt_proj)                   MAMBA_X_PROJ,MAMBA_DT_PROJ
        layers.{i}.mixer.A_log                              A_LOG       tensor
        layers.{i}.mixer.D                                  SSM_D       tensor
        norm_f                                              FINAL_NORM
"""


class MambaConverter(Converter, model_type="mamba", hf_prefix="Mamba", family="decoder"):
    requires = {"hidden_act": "silu"}
    fixed = spec_parts(
        "dropout: 0.0, embedding: token, position: none, norm: rmsnorm",
        "block: {kind: pre_ln, ffn_norm: false}, ffn: none",
        "attention: {kind: mamba}",
        "n_heads: 1",  # the mixer has no heads; the spec asks for a count
    )
    fields = (
        *parse_fields(
            """
            vocab_size                  vocab_size
            hidden_size                 d_model
            num_hidden_layers           n_layers
            state_size                  attention.state_size            16
            conv_kernel                 attention.conv_kernel           4
            use_bias                    attention.bias                  False
            use_conv_bias               attention.conv_bias             True
            layer_norm_epsilon          norm.eps                        1e-5
            """
        ),
        Field("expand", "attention.d_inner", 2),  # read and written by adjust
        Field("time_step_rank", "attention.dt_rank", "auto"),
        *PAD,
    )
    tasks = {"Model": HEADLESS, "ForCausalLM": lm_task(True)}
    tensors = table(MAMBA_TENSORS, prefixes=("backbone.", ""))

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """The mixer's width (expand x hidden_size) and step rank ("auto": hidden_size / 16,
        rounded up), and a context of 2^20 tokens: Mamba has no position limit."""
        hidden, mixer = config["hidden_size"], spec["attention"]
        mixer["d_inner"] = int(config.get("expand", 2) * hidden)
        rank = config.get("time_step_rank", "auto")
        mixer["dt_rank"] = math.ceil(hidden / 16) if rank == "auto" else int(rank)
        spec.setdefault("max_len", 1 << 20)

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """The inverse of `adjust`: expand from the mixer's width, the step rank."""
        mixer, d = spec["attention"], spec["d_model"]
        width = mixer["d_inner"] or 2 * d  # null: the mixer's default
        config["expand"] = integer_expand(width, d, "MambaConfig")
        config["time_step_rank"] = mixer["dt_rank"] or math.ceil(d / 16)
