"""Mistral: Llama with a causal sliding window of `sliding_window` keys (including itself)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import ConversionError

from .llama import LlamaConverter


class MistralConverter(LlamaConverter, model_type="mistral", hf_prefix="Mistral"):
    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """One sliding window for every layer (`layer_types` mixing kinds is refused)."""
        window = config.get("sliding_window")
        kinds = set(config.get("layer_types") or ())
        if kinds - {"sliding_attention"} and window is not None:
            raise ConversionError(
                f"config.json layer_types={config['layer_types']!r} mixes attention kinds; "
                "only one sliding window for every layer is supported"
            )
        super().adjust(spec, config)
        if window is not None:
            spec["attention"] = {**spec["attention"], "kind": "local", "window": int(window)}

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """A local attention's window as `sliding_window` (none for dense attention)."""
        super().adjust_config(config, spec)
        attention = spec["attention"]
        config["sliding_window"] = attention["window"] if attention["kind"] == "local" else None
