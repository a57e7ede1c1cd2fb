"""Gemma 3 (text): Gemma 2's sandwich layout with a per-head QK RMSNorm ((1 + w), like every
Gemma norm), five sliding-window layers to each global one (`layer_types`), and a rotary
base of their own for the sliding layers (`rope_local_base_freq`); RoPE scaling, when set,
applies to the global layers only."""

from __future__ import annotations

from typing import Any

from archzoo.parts.component import config_defaults
from archzoo.parts.converter import ConversionError, spec_parts

from ..position.rotary import RotaryPosition
from .common import HEADLESS, decoder_tasks, table
from .gemma2 import SANDWICH_TENSORS, Gemma2Converter, capped_lm_task, sliding_layers
from .llama import MLP_TENSORS, ROTARY_BUFFER
from .qwen import QK_NORM_TENSORS
from .rope import rope_parameters

GLOBAL_BASE, LOCAL_BASE = 1_000_000.0, 10_000.0  # transformers' defaults


def gemma3_rotary(
    config: dict[str, Any],
    keys: tuple[str, str] = ("rope_theta", "rope_local_base_freq"),
    bases: tuple[float, float] = (GLOBAL_BASE, LOCAL_BASE),
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Rotary settings of the global and the sliding layers, from transformers 5's
    per-layer-type `rope_parameters` or 4's global / local base `keys` and rope_scaling
    (`bases`: the type's defaults)."""
    params = config.get("rope_parameters") or {}
    if "full_attention" in params or "sliding_attention" in params:
        full = {"rope_theta": bases[0], **(params.get("full_attention") or {})}
        sliding = {"rope_theta": bases[1], **(params.get("sliding_attention") or {})}
        plain = {k: v for k, v in config.items() if k not in ("rope_parameters", "rope_scaling")}
        return (
            rope_parameters({**plain, "rope_parameters": full}),
            rope_parameters({**plain, "rope_parameters": sliding}),
        )
    glob = rope_parameters({**config, "rope_theta": config.get(keys[0], bases[0])})
    local = {"rope_theta": config.get(keys[1], bases[1])}
    plain = {k: v for k, v in config.items() if k not in ("rope_parameters", "rope_scaling")}
    return glob, rope_parameters({**plain, "rope_parameters": local})


class Gemma3TextConverter(Gemma2Converter, model_type="gemma3_text", hf_prefix="Gemma3"):
    fixed = {
        **Gemma2Converter.fixed,
        **spec_parts("attention: {kind: mha, fused_qkv: false, qk_norm: head}"),
    }
    # transformers' Gemma 3 reads no attn_logit_softcapping (the QK norm bounds the scores)
    fields = tuple(f for f in Gemma2Converter.fields if f.hf != "attn_logit_softcapping")
    tasks = {
        **decoder_tasks("ForCausalLM", capped_lm_task(), token="score"),
        "TextModel": HEADLESS,  # Gemma3TextModel (Gemma3Model is the multimodal one)
    }
    tasks["TextForSequenceClassification"] = tasks["ForSequenceClassification"]  # text-only
    tensors = table(
        SANDWICH_TENSORS + MLP_TENSORS + QK_NORM_TENSORS,
        prefixes=("model.", "transformer.", ""),
        ignore=ROTARY_BUFFER,
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Score scale, the two rotary bases, and the sliding-window layers."""
        if config.get("use_bidirectional_attention"):
            raise ConversionError("config.json use_bidirectional_attention=true is not supported")
        glob, local = gemma3_rotary(config)
        spec["position"] = {"kind": "rotary", **glob}
        scalar = config.get("query_pre_attn_scalar")
        if scalar is not None:
            spec["attention"]["scale"] = float(scalar) ** -0.5
        every = int(config.get("sliding_window_pattern") or 6)
        # every parameter stated: a layer's position merges onto the stack's (its scaling)
        local = {"kind": "rotary", **config_defaults(RotaryPosition), **local}
        sliding_layers(spec, config, every, local_position=local)
