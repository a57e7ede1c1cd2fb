"""OLMo 3: OLMo 2's layout with sliding-window layers (`layer_types`, three in four by
default) and a rotary of their own per layer type (`rope_parameters` keyed by layer type;
transformers 4's rope_scaling reaches the full-attention layers only)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.component import config_defaults
from archzoo.specs.plan import layer_components, stack_config

from ..position.rotary import RotaryPosition
from .gemma2 import sliding_config, sliding_layers
from .gemma3 import gemma3_rotary
from .olmo2 import Olmo2Converter
from .rope import rope_config

THETA = 500000.0  # Olmo3Config's default_theta, for both layer types


class Olmo3Converter(Olmo2Converter, model_type="olmo3", hf_prefix="Olmo3"):
    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Each layer type's rotary (in fp32, as OLMo 2's), and the sliding layers."""
        glob, local = gemma3_rotary(config, ("rope_theta", "rope_theta"), (THETA, THETA))
        spec["position"] = {"kind": "rotary", **glob, "rotate_fp32": True}
        own = {"kind": "rotary", **config_defaults(RotaryPosition), **local, "rotate_fp32": True}
        sliding_layers(spec, config, default_every=4, local_position=None if local == glob else own)

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """The inverse of `adjust`: `layer_types`, `sliding_window`, and `rope_parameters`
        per layer type."""
        sliding_config(config, spec)
        layers = layer_components(stack_config(dict(spec), "decoder"))
        params = {}
        for kind, comps in zip(config["layer_types"], layers, strict=True):
            params.setdefault(kind, rope_config(comps["position"]).get("rope_parameters", {}))
        for kind in ("full_attention", "sliding_attention"):
            params.setdefault(kind, params.get("full_attention") or params["sliding_attention"])
        config["rope_parameters"] = params
