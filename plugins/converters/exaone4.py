"""EXAONE 4.0: OLMo 2's layout (norms after each sublayer, before the residual add) with an
RMSNorm over each head's queries and keys, and, where `sliding_window` is set, sliding-window
layers (`layer_types`, three in four by default) that rotate between global layers that see
no positions (NoPE); without a window every layer is global and rotates."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import ConversionError, spec_parts

from .common import table
from .gemma2 import sliding_config, sliding_layers
from .llama import ROTARY_BUFFER, LlamaConverter
from .qwen import QK_NORM_TENSORS


class Exaone4Converter(LlamaConverter, model_type="exaone4", hf_prefix="Exaone4"):
    fixed = {
        **LlamaConverter.fixed,
        **spec_parts("block: res_post_ln, attention: {kind: mha, fused_qkv: false, qk_norm: head}"),
    }
    tensors = table(
        """
        embed_tokens                            WORD
        layers.{i}.self_attn.(q_proj,k_proj,v_proj,o_proj)      Q,K,V,ATTN_OUT
        layers.{i}.post_attention_layernorm     ATTN_NORM
        layers.{i}.mlp.(gate_proj,up_proj,down_proj)            GATE,UP,DOWN
        layers.{i}.post_feedforward_layernorm   FFN_NORM
        norm                                    FINAL_NORM
        """
        + QK_NORM_TENSORS,
        prefixes=("model.", "transformer.", ""),
        ignore=ROTARY_BUFFER,
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Llama's rotary; with a window, the sliding layers and the NoPE global ones."""
        super().adjust(spec, config)
        if config.get("sliding_window") is None:
            return
        every = config.get("sliding_window_pattern", 4)
        if config.get("layer_types") is None and not isinstance(every, int):
            raise ConversionError(
                f"config.json sliding_window_pattern={every!r} without layer_types is not "
                "supported (transformers reads an integer)"
            )
        sliding_layers(spec, config, default_every=every)
        for part in (spec, *spec.get("layers", [])):
            attention = part.get("attention")
            if attention is not None and attention["kind"] != "local":
                attention["use_position"] = False

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """The inverse of `adjust`: `layer_types` and `sliding_window` from each layer."""
        super().adjust_config(config, spec)
        sliding_config(config, spec)
