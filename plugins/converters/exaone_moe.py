"""K-EXAONE (`exaone_moe`): EXAONE 4.0's attention (an RMSNorm over each head's queries and
keys; sliding-window layers that rotate between global layers without positions) in pre-LN
layers, with DeepSeek-V3's experts (sigmoid routing with a correction bias, groups, shared
experts) after the dense layers `mlp_layer_types` names."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import ConversionError, parse_fields
from archzoo.specs.plan import layer_components, stack_config

from .common import table
from .deepseek import MOE_TENSORS
from .dots1 import Dots1Converter
from .gemma2 import sliding_config, sliding_layers
from .glm4_moe import Glm4MoeConverter
from .llama import ATTENTION_TENSORS, MLP_TENSORS, ROTARY_BUFFER
from .qwen import QK_NORM_TENSORS
from .rope import rope_parameters

RENAMED = ("n_routed_experts", "n_shared_experts", "first_k_dense_replace")
DENSE = {"kind": "glu", "activation": "swiglu"}


class ExaoneMoeConverter(Dots1Converter, model_type="exaone_moe", hf_prefix="ExaoneMoe"):
    fields = (
        *(f for f in Dots1Converter.fields if f.hf not in RENAMED),
        *parse_fields(
            """
            num_experts             ffn.n_experts       64
            num_shared_experts      ffn.n_shared        1
            """
        ),
    )

    tensors = table(  # its checkpoints keep the correction bias beside the gate, not in it
        ATTENTION_TENSORS
        + QK_NORM_TENSORS
        + MLP_TENSORS
        + MOE_TENSORS.replace(
            "layers.{i}.mlp.gate.e_score_correction_bias",
            "layers.{i}.mlp.e_score_correction_bias|layers.{i}.mlp.gate.e_score_correction_bias",
        ),
        prefixes=("model.", ""),
        ignore=ROTARY_BUFFER,
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Full rotary, dense layers, and with a window the sliding and NoPE global layers."""
        spec["position"] = {"kind": "rotary", **rope_parameters(config)}
        n = spec["n_layers"]
        first = int(config.get("first_k_dense_replace", 1) or 0)
        kinds = config.get("mlp_layer_types") or [
            "dense" if i < first else "sparse" for i in range(n)
        ]
        if len(kinds) != n or set(kinds) - {"dense", "sparse"}:
            raise ConversionError(f"config.json mlp_layer_types={kinds!r}: not {n} dense/sparse")
        dense = [i for i, kind in enumerate(kinds) if kind == "dense"]
        spec["layers"] = [{"select": dense, "ffn": dict(DENSE)}] if dense else []
        if config.get("sliding_window") is None:
            return  # every layer global, and each rotates
        sliding_layers(spec, config, default_every=1)
        for part in (spec, *spec["layers"]):
            attention = part.get("attention")
            if attention is not None and attention["kind"] != "local":
                attention["use_position"] = False

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """GLM-4.5's, with each layer's MLP type, `layer_types` and `sliding_window`."""
        Glm4MoeConverter.adjust_config(self, config, spec)
        layers = layer_components(stack_config(dict(spec), "decoder"))
        config["mlp_layer_types"] = [
            "sparse" if c["ffn"]["kind"] == "moe" else "dense" for c in layers
        ]
        config.pop("first_k_dense_replace", None)
        sliding_config(config, spec)
