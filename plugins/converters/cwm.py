"""CWM (Code World Model): Llama's layout (no biases, llama3 rotary scaling) with sliding-window
layers between global ones (`layer_types`; three in four slide by default)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .gemma2 import sliding_config, sliding_layers
from .llama import LlamaConverter


class CwmConverter(LlamaConverter, model_type="cwm", hf_prefix="Cwm"):
    layout_of = "llama"  # a Llama spec exports as llama unless imported from cwm
    tasks = {k: v for k, v in LlamaConverter.tasks.items() if k in ("Model", "ForCausalLM")}

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Llama's rotary, and the sliding-window layers (by default layers 0, 4, 8, ...
        are global, as CwmConfig lays them out)."""
        super().adjust(spec, config)
        if not config.get("sliding_window"):
            return
        n = spec["n_layers"]
        default = ["full_attention" if i % 4 == 0 else "sliding_attention" for i in range(n)]
        sliding_layers(spec, {**config, "layer_types": config.get("layer_types") or default}, 4)

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """The inverse of `adjust`: `layer_types` and `sliding_window` from each layer."""
        super().adjust_config(config, spec)
        sliding_config(config, spec)
        if config["sliding_window"] is None:  # CwmConfig takes an int; no layer slides
            config["sliding_window"] = 8192
