"""Jais 2: Llama's tensor names with LayerNorms (with biases), biases on every projection by
default, and a plain MLP (up, down) with squared ReLU (Nemotron's)."""

from __future__ import annotations

from archzoo.parts.converter import parse_fields, spec_parts

from .arcee import ArceeConverter
from .common import decoder_tasks, lm_task, with_defaults


class Jais2Converter(ArceeConverter, model_type="jais2", hf_prefix="Jais2"):
    fixed = {**ArceeConverter.fixed, **spec_parts("norm: {kind: layernorm, bias: true}")}
    fields = (
        *with_defaults(
            (f for f in ArceeConverter.fields if f.hf != "rms_norm_eps"),
            attention_bias=True,
            mlp_bias=True,
        ),
        *parse_fields("layer_norm_eps  norm.eps  1e-5"),
    )
    tasks = {
        k: v
        for k, v in decoder_tasks("ForCausalLM", lm_task(False), token="score").items()
        if k in ("Model", "ForCausalLM")
    }
