"""SmolLM3: Llama with no rotary positions in every `no_rope_layer_interval`-th layer (NoPE)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import ConversionError
from archzoo.specs.plan import layer_components, stack_config

from .llama import LlamaConverter


class SmolLM3Converter(LlamaConverter, model_type="smollm3", hf_prefix="SmolLM3"):
    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """`no_rope_layers[i] == 0`: layer i attends without rotary positions."""
        if config.get("use_sliding_window"):
            raise ConversionError("config.json use_sliding_window=true is not supported")
        super().adjust(spec, config)
        flags = config.get("no_rope_layers") or []
        nope = [i for i, uses_rope in enumerate(flags) if not uses_rope]
        if nope:
            spec["layers"] = [{"select": nope, "attention": {"use_position": False}}]

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """`no_rope_layers`: 1 where a layer's attention uses rotary positions, else 0."""
        super().adjust_config(config, spec)
        layers = layer_components(stack_config(dict(spec), "decoder"))
        config["no_rope_layers"] = [int(layer["attention"]["use_position"]) for layer in layers]
        config["use_sliding_window"] = False
