"""Mistral: Llama with a causal sliding window of `sliding_window` keys (including itself)."""

from __future__ import annotations

from typing import Any

from archzoo.converter import ConversionError

from .llama import LlamaConverter


class MistralConverter(LlamaConverter):
    model_type = "mistral"

    def to_spec(self, config: dict[str, Any]) -> dict[str, Any]:
        if config.get("layer_types"):
            kinds = set(config["layer_types"])
            if kinds - {"sliding_attention"} and config.get("sliding_window") is not None:
                raise ConversionError(
                    f"config.json layer_types={config['layer_types']!r} mixes attention kinds; "
                    "only one sliding window for every layer is supported"
                )
        spec = super().to_spec(config)
        window = config.get("sliding_window")
        if window is not None:
            spec["attention"] = {**spec["attention"], "kind": "local", "window": int(window)}
        return spec
