"""Phi-3: the Llama layout with q|k|v in one projection and gate|up in another (split by the
table), LongRoPE scaling, and an optional sliding window."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import parse_fields, spec_parts

from .common import table
from .llama import ROTARY_BUFFER, LlamaConverter
from .mistral import MistralConverter
from .rope import rope_parameters

PHI3_TENSORS = """
    embed_tokens                                WORD
    layers.{i}.input_layernorm                  ATTN_NORM
    layers.{i}.self_attn.qkv_proj               QKV
    layers.{i}.self_attn.o_proj                 ATTN_OUT
    layers.{i}.post_attention_layernorm         FFN_NORM
    layers.{i}.mlp.gate_up_proj                 GATE,UP     split
    layers.{i}.mlp.down_proj                    DOWN
    norm                                        FINAL_NORM
"""


class Phi3Converter(MistralConverter, model_type="phi3", hf_prefix="Phi3"):
    fixed = {
        **LlamaConverter.fixed,
        **spec_parts("attention: {kind: mha, fused_qkv: true, bias: false}"),
    }
    fields = (
        *(f for f in LlamaConverter.fields if f.hf not in ("attention_bias", "rms_norm_eps")),
        *parse_fields(
            """
            resid_pdrop         dropout         0.0
            rms_norm_eps        norm.eps        1e-5
            """
        ),
    )
    tensors = table(PHI3_TENSORS, prefixes=("model.", ""), ignore=ROTARY_BUFFER)

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Sliding window as Mistral's; `su` and `yarn` scaling are LongRoPE here, as in
        transformers, with the top-level original_max_position_embeddings (default 4096), and
        generation recomputes the cache on passing it (Phi-3's prepare_inputs_for_generation)."""
        super().adjust(spec, config)
        params = {**(config.get("rope_scaling") or {}), **(config.get("rope_parameters") or {})}
        kind = params.get("rope_type", params.get("type", "default"))
        if kind in ("su", "yarn", "longrope"):
            original = config.get("original_max_position_embeddings") or 4096
            longrope = {**params, "rope_type": "longrope"}
            longrope["original_max_position_embeddings"] = original
            position = rope_parameters(
                {**config, "rope_parameters": longrope, "rope_scaling": None}
            )
            spec["position"] = {"kind": "rotary", **position, "recache": True}

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """The window and rotary as Mistral's, and LongRoPE's pre-training length at the
        top level, where Phi-3 reads it (its default is 4096)."""
        super().adjust_config(config, spec)
        position = spec["position"]
        if position.get("scaling") == "longrope" and position.get("original_max_len"):
            config["original_max_position_embeddings"] = position["original_max_len"]
