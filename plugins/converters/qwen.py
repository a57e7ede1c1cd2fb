"""Qwen2 (q/k/v biases), Qwen3 (per-head QK RMSNorm) and Qwen3-MoE (routed experts on some
layers); with `use_sliding_window`, Qwen2 and Qwen3 slide a window over the layers from
`max_window_layers` on, Qwen3-MoE over every layer."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import ConversionError, get, spec_parts
from archzoo.specs.plan import layer_components, stack_config

from .common import LM_HEAD, table
from .experts import GATE_UP_DOWN_PROJ
from .gemma2 import sliding_config, sliding_layers
from .llama import ATTENTION_TENSORS, MLP_TENSORS, LlamaConverter
from .mixtral import (
    MOE_TENSORS,
    SWIGLU_EXPERTS,
    ExpertsConverter,
    aux_loss_coef,
    aux_loss_config,
    moe_fields,
)

QK_NORM_TENSORS = """
        layers.{i}.self_attn.(q_norm,k_norm)    Q_NORM,K_NORM
"""


class WindowedQwen(LlamaConverter):
    """Qwen2's and Qwen3's rule (transformers' Qwen2Config): with `use_sliding_window`, the
    layers from `max_window_layers` on attend over a causal window of `sliding_window` keys
    (itself included), unless `layer_types` says which; without it, every layer is full."""

    reads_layer_types = True  # False: transformers ignores config.json's layer_types

    def slides(self, i: int, window_layers: int) -> bool:
        """Whether layer i slides under `use_sliding_window` (`max_window_layers` given)."""
        return i >= window_layers

    def window_layers(self, local: list[int]) -> int:
        """The `max_window_layers` that makes exactly the `local` layers slide."""
        return local[0]

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        super().adjust(spec, config)
        n = spec["n_layers"]
        window = config.get("sliding_window", 4096) if config.get("use_sliding_window") else None
        start = get(config, "max_window_layers", 28)
        kinds = (self.reads_layer_types and config.get("layer_types")) or [
            "sliding_attention"
            if window is not None and self.slides(i, start)
            else "full_attention"
            for i in range(n)
        ]
        if window is None and "sliding_attention" in kinds:
            raise ConversionError(
                f"config.json layer_types={kinds!r} has sliding_attention layers but "
                "use_sliding_window is false (transformers has no window for them)"
            )
        sliding_layers(spec, {**config, "layer_types": kinds, "sliding_window": window}, 1)

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """Local layers as `use_sliding_window`, `sliding_window`, `layer_types` and
        `max_window_layers` (where the type reads them); none: nothing written."""
        super().adjust_config(config, spec)
        layers = [c["attention"] for c in layer_components(stack_config(dict(spec), "decoder"))]
        local = [i for i, a in enumerate(layers) if a["kind"] == "local"]
        if local:
            sliding_config(config, spec)
            config.update(use_sliding_window=True, max_window_layers=self.window_layers(local))
            if not self.reads_layer_types:
                del config["layer_types"], config["max_window_layers"]


class Qwen2Converter(WindowedQwen, model_type="qwen2", hf_prefix="Qwen2"):
    fixed = {
        **LlamaConverter.fixed,
        **spec_parts("attention: {kind: mha, fused_qkv: false, bias: true, out_bias: false}"),
    }
    fields = tuple(f for f in LlamaConverter.fields if f.hf != "attention_bias")


class Qwen3Converter(WindowedQwen, model_type="qwen3", hf_prefix="Qwen3"):
    fixed = {
        **LlamaConverter.fixed,
        **spec_parts("attention: {kind: mha, fused_qkv: false, qk_norm: head}"),
    }
    tensors = table(
        ATTENTION_TENSORS + MLP_TENSORS + QK_NORM_TENSORS, LM_HEAD, prefixes=("model.", "")
    )


class Qwen3MoeConverter(
    ExpertsConverter, Qwen3Converter, model_type="qwen3_moe", hf_prefix="Qwen3Moe"
):
    per_expert = GATE_UP_DOWN_PROJ
    reads_layer_types = False  # Qwen3-MoE slides every layer under use_sliding_window
    fixed = {**Qwen3Converter.fixed, **SWIGLU_EXPERTS}
    fields = moe_fields(
        LlamaConverter.fields,
        """
        moe_intermediate_size       ffn.d_expert
        norm_topk_prob              ffn.normalize       False
        """,
    )
    tensors = table(
        ATTENTION_TENSORS + MLP_TENSORS + QK_NORM_TENSORS + MOE_TENSORS,
        LM_HEAD,
        prefixes=("model.", ""),
    )

    def slides(self, i: int, window_layers: int) -> bool:
        return True

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        super().adjust(spec, config)
        aux_loss_coef(spec, config)
        step = int(config.get("decoder_sparse_step") or 1)
        dense_only = set(config.get("mlp_only_layers") or ())
        n = spec["n_layers"]
        dense = [i for i in range(n) if i in dense_only or (i + 1) % step != 0]
        if dense:  # these layers keep a dense SwiGLU of intermediate_size
            dense_ffn = {"select": dense, "ffn": {"kind": "glu", "activation": "swiglu"}}
            spec["layers"] = [*spec.get("layers", []), dense_ffn]

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """Layers with a dense SwiGLU as `mlp_only_layers` (every other layer routed)."""
        super().adjust_config(config, spec)
        aux_loss_config(config, spec)
        layers = layer_components(stack_config(dict(spec), "decoder"))
        config["decoder_sparse_step"] = 1
        config["mlp_only_layers"] = [i for i, c in enumerate(layers) if c["ffn"]["kind"] != "moe"]
