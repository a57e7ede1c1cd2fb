"""Mellum (JetBrains, `mellum`): Qwen3-MoE's layers (per-head QK RMSNorm, softmax top-k
experts, renormalised by default) with a kind per layer: `layer_types` says which layers
attend over a causal window of `sliding_window` keys, `rope_parameters` gives each kind its
own rotary (base 5e5 global, 1e4 sliding by default), `mlp_layer_types` which layers keep a
dense SwiGLU of `intermediate_size`. Its multi-token-prediction layer is not read."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.component import config_defaults
from archzoo.specs.plan import layer_components, stack_config

from ..position.rotary import RotaryPosition
from .common import LM_HEAD, table, with_defaults
from .experts import GATE_UP_DOWN_PROJ
from .gemma2 import sliding_config, sliding_layers
from .gemma3 import gemma3_rotary
from .llama import ATTENTION_TENSORS, MLP_TENSORS, LlamaConverter
from .mixtral import MOE_TENSORS, ExpertsConverter, aux_loss_coef, aux_loss_config
from .qwen import QK_NORM_TENSORS, Qwen3MoeConverter
from .rope import rope_config

BASES = (500_000.0, 10_000.0)  # MellumConfig's default global and sliding rotary bases


class MellumConverter(ExpertsConverter, LlamaConverter, model_type="mellum", hf_prefix="Mellum"):
    per_expert = GATE_UP_DOWN_PROJ
    fixed = Qwen3MoeConverter.fixed
    fields = with_defaults(
        Qwen3MoeConverter.fields, max_position_embeddings=131072, norm_topk_prob=True
    )
    tasks = {k: v for k, v in LlamaConverter.tasks.items() if k in ("Model", "ForCausalLM")}
    tensors = table(
        ATTENTION_TENSORS + MLP_TENSORS + QK_NORM_TENSORS + MOE_TENSORS,
        LM_HEAD,
        prefixes=("model.", ""),
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Each layer kind's rotary and window, and the dense layers."""
        aux_loss_coef(spec, config)
        glob, local = gemma3_rotary(config, bases=BASES)
        spec["position"] = {"kind": "rotary", **glob}
        local = {"kind": "rotary", **config_defaults(RotaryPosition), **local}
        n = spec["n_layers"]
        kinds = config.get("layer_types") or ["full_attention"] * n
        window = config.get("sliding_window", 1024)
        sliding_layers(spec, {**config, "layer_types": kinds, "sliding_window": window}, 1, local)
        mlp = config.get("mlp_layer_types") or ["sparse"] * n
        dense = [i for i, kind in enumerate(mlp) if kind == "dense"]
        if dense:  # these layers keep a dense SwiGLU of intermediate_size
            dense_ffn = {"select": dense, "ffn": {"kind": "glu", "activation": "swiglu"}}
            spec["layers"] = [*spec.get("layers", []), dense_ffn]

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """The inverse of `adjust`: layer_types, sliding_window, per-kind rope_parameters and
        mlp_layer_types."""
        aux_loss_config(config, spec)
        layers = layer_components(stack_config(dict(spec), "decoder"))
        sliding_config(config, spec)
        positions = {"full_attention": spec["position"], "sliding_attention": spec["position"]}
        for kind, c in zip(config["layer_types"], layers, strict=True):
            positions[kind] = c["position"]
        config["rope_parameters"] = {
            kind: rope_config(dict(p)).get("rope_parameters") for kind, p in positions.items()
        }
        config["mlp_layer_types"] = [
            "sparse" if c["ffn"]["kind"] == "moe" else "dense" for c in layers
        ]
