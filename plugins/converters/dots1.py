"""dots.llm1 (rednote): Qwen3's attention (per-head QK RMSNorm, full rotary) with GLM-4.5's
DeepSeek-V3 experts and dense first layers, and sliding-window layers from
`max_window_layers` on (`layer_types`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import Field, parse_fields, spec_parts

from .common import with_defaults
from .gemma2 import sliding_config, sliding_layers
from .glm4_moe import Glm4MoeConverter
from .rope import rope_parameters

OWN = ("use_qk_norm", "attention_bias", "num_key_value_heads", "norm_topk_prob")


class Dots1Converter(Glm4MoeConverter, model_type="dots1", hf_prefix="Dots1"):
    fixed = {
        **Glm4MoeConverter.fixed,
        **spec_parts("attention: {kind: mha, fused_qkv: false, qk_norm: head}"),
    }
    fields = (
        *with_defaults(  # Dots1Config's defaults where they differ from GLM-4.5's
            (f for f in Glm4MoeConverter.fields if f.hf not in OWN),
            max_position_embeddings=2048,
            rms_norm_eps=1e-6,
        ),
        *parse_fields(
            """
            attention_bias      attention.bias,attention.out_bias   False
            norm_topk_prob      ffn.normalize                       False
            """
        ),
        Field("num_key_value_heads", "attention.n_kv_heads", lambda c: c["num_attention_heads"]),
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Full rotary, the first dense layers, and the sliding-window layers."""
        spec["position"] = {"kind": "rotary", **rope_parameters(config)}
        dense = min(int(config.get("first_k_dense_replace") or 0), spec["n_layers"])
        if dense:  # these layers keep a dense SwiGLU of intermediate_size
            spec["layers"] = [
                {"select": list(range(dense)), "ffn": {"kind": "glu", "activation": "swiglu"}}
            ]
        if config.get("layer_types") is None:
            start = config.get("max_window_layers", spec["n_layers"])
            window = config.get("sliding_window")
            config = {
                **config,
                "layer_types": [
                    "sliding_attention" if window is not None and i >= start else "full_attention"
                    for i in range(spec["n_layers"])
                ],
            }
        sliding_layers(spec, config, default_every=1)

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """GLM-4.5's, with `layer_types` and `sliding_window` from each layer."""
        super().adjust_config(config, spec)
        sliding_config(config, spec)
        config["max_window_layers"] = spec["n_layers"]  # the layer types say which slide
