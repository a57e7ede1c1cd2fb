"""Ministral 3: Mistral's layout on YaRN rotary whose queries, after the rotation, are scaled
by position as Llama 4's are: 1 + beta ln(1 + floor(i / original_max_position_embeddings)),
beta `rope_parameters.llama_4_scaling_beta` (the mha query temperature, offset 0)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import ConversionError

from .mistral import MistralConverter


class Ministral3Converter(MistralConverter, model_type="ministral3", hf_prefix="Ministral3"):
    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """The query temperature from rope_parameters (beta 0: none)."""
        super().adjust(spec, config)
        rope = config.get("rope_parameters") or {}
        beta, floor = rope.get("llama_4_scaling_beta"), rope.get("original_max_position_embeddings")
        if beta is None or floor is None:
            raise ConversionError(
                "config.json rope_parameters needs llama_4_scaling_beta and "
                f"original_max_position_embeddings (got {beta!r}, {floor!r})"
            )
        if beta:
            spec["attention"] = {
                **spec["attention"],
                "temperature_floor": int(floor),
                "temperature_scale": float(beta),
                "temperature_offset": 0,
            }

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """The temperature back into rope_parameters (beta 0 where there is none)."""
        super().adjust_config(config, spec)
        attention = spec["attention"]
        rope = config.setdefault("rope_parameters", {})
        floor = attention.get("temperature_floor")
        rope["llama_4_scaling_beta"] = attention.get("temperature_scale") if floor else 0.0
        if floor is not None:
            rope["original_max_position_embeddings"] = floor
        rope.setdefault(
            "original_max_position_embeddings", spec["position"].get("original_max_len")
        )
