"""GLM-4.7-Flash (`glm4_moe_lite`): DeepSeek-V3's layout (latent attention, sigmoid-routed
experts with a correction bias and a shared expert) whose dense layers are named by
`mlp_layer_types` ("dense" / "sparse" per layer; the first dense by default)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import ConversionError
from archzoo.specs.plan import layer_components, stack_config

from .common import with_defaults
from .deepseek import DeepseekV3Converter


class Glm4MoeLiteConverter(
    DeepseekV3Converter, model_type="glm4_moe_lite", hf_prefix="Glm4MoeLite"
):
    fields = with_defaults(  # Glm4MoeLiteConfig's defaults where they differ from DeepSeek-V3's
        DeepseekV3Converter.fields,
        rms_norm_eps=1e-5,
        qk_nope_head_dim=192,
        v_head_dim=256,
        n_routed_experts=64,
        num_experts_per_tok=4,
        moe_intermediate_size=1536,
        routed_scaling_factor=1.8,
    )

    tasks = {k: v for k, v in DeepseekV3Converter.tasks.items() if k in ("Model", "ForCausalLM")}

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """DeepSeek-V3's rotary and scale; the layers `mlp_layer_types` calls dense."""
        super().adjust(spec, config)
        n = spec["n_layers"]
        kinds = config.get("mlp_layer_types") or ["dense"] + ["sparse"] * (n - 1)
        if len(kinds) != n or set(kinds) - {"dense", "sparse"}:
            raise ConversionError(
                f"config.json mlp_layer_types={kinds!r}: expected {n} of 'dense' / 'sparse'"
            )
        dense = [i for i, kind in enumerate(kinds) if kind == "dense"]
        spec["attention"]["latent_norm_eps"] = 1e-6  # Glm4MoeLiteRMSNorm's default there
        spec.pop("layers", None)
        if dense:  # these layers keep a dense SwiGLU of intermediate_size
            spec["layers"] = [{"select": dense, "ffn": {"kind": "glu", "activation": "swiglu"}}]

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """The inverse of `adjust`: `mlp_layer_types` from each layer's FFN."""
        super().adjust_config(config, spec)
        config.pop("first_k_dense_replace", None)
        layers = layer_components(stack_config(dict(spec), "decoder"))
        config["mlp_layer_types"] = [
            "sparse" if c["ffn"]["kind"] == "moe" else "dense" for c in layers
        ]
