"""Granite SWA (IBM, `granite_swa`): Granite's four multipliers with a learned sink logit per
head (its sigmoid(logsumexp - sink) rescaling is GPT-OSS's extra softmax logit), windows of
`sliding_window` keys on the layers `layer_types` names (default: all but every fourth) and a
rotary base per layer (`layer_rope_theta`; 0: the layer sees no positions)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import spec_parts

from .common import table
from .granite import GraniteConverter
from .layer_windows import window_and_base_config, window_and_base_layers
from .llama import ATTENTION_TENSORS, MLP_TENSORS, ROTARY_BUFFER

SINK_TENSORS = "layers.{i}.self_attn.sinks    SINKS    tensor\n"


class GraniteSWAConverter(GraniteConverter, model_type="granite_swa", hf_prefix="GraniteSWA"):
    attention_impl = "eager"  # transformers has no SDPA path for the sinks
    fixed = {
        **GraniteConverter.fixed,
        **spec_parts("attention: {kind: mha, fused_qkv: false, sinks: true}"),
    }
    tensors = table(
        ATTENTION_TENSORS + MLP_TENSORS + SINK_TENSORS,
        prefixes=("model.", ""),
        ignore=ROTARY_BUFFER,
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        super().adjust(spec, config)
        window_and_base_layers(spec, config)

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        super().adjust_config(config, spec)
        window_and_base_config(config, spec)
