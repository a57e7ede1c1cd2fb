"""Cohere 2 (Command R7B, Command A): Cohere's parallel layout without QK norms, sliding-window
layers (`layer_types`, three in four by default) that rotate, and global layers that see no
positions at all (NoPE)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .cohere import CohereConverter
from .gemma2 import sliding_config, sliding_layers


class Cohere2Converter(CohereConverter, model_type="cohere2", hf_prefix="Cohere2"):
    fields = tuple(f for f in CohereConverter.fields if f.hf != "use_qk_norm")

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Cohere's rotary on the sliding layers; the others attend without positions."""
        super().adjust(spec, config)
        sliding_layers(spec, config, default_every=4)
        for part in (spec, *spec.get("layers", [])):
            attention = part.get("attention")
            if attention is not None and attention["kind"] != "local":
                attention["use_position"] = False

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """The inverse of `adjust`: `layer_types` and `sliding_window` from each layer."""
        super().adjust_config(config, spec)
        sliding_config(config, spec)
