"""Youtu-LLM (Tencent, `youtu`): DeepSeek-V3's latent attention (interleaved rotary, YaRN's
softmax scale) in Llama's layers: a dense SwiGLU MLP in every layer, no experts, a head tied
to the token embedding by default."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import spec_parts

from .common import decoder_tasks, lm_task, table, with_defaults
from .deepseek import MLA_TENSORS, DeepseekV3Converter
from .llama import MLP_TENSORS, ROTARY_BUFFER
from .minicpm3 import MOE_KEYS


class YoutuConverter(DeepseekV3Converter, model_type="youtu", hf_prefix="Youtu"):
    fixed = {**DeepseekV3Converter.fixed, **spec_parts("ffn: {kind: glu, activation: swiglu}")}
    fields = with_defaults(  # YoutuConfig's defaults where they differ from DeepSeek-V3's
        (f for f in DeepseekV3Converter.fields if f.hf not in MOE_KEYS),
        max_position_embeddings=131072,
        q_lora_rank=1536,
    )
    tasks = {
        k: v
        for k, v in decoder_tasks("ForCausalLM", lm_task(True)).items()
        if k in ("Model", "ForCausalLM")
    }
    tensors = table(MLA_TENSORS + MLP_TENSORS, prefixes=("model.", ""), ignore=ROTARY_BUFFER)

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """DeepSeek-V3's attention and rotary; no layer is routed."""
        super().adjust(spec, config)
        if "q_lora_rank" in config and config["q_lora_rank"] is None:  # stated: a plain q
            spec["attention"]["q_lora_rank"] = None  # (absent: the default 1536)
        spec.pop("layers", None)

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """DeepSeek-V3's keys without its count of dense layers (every layer is dense)."""
        super().adjust_config(config, spec)
        config.pop("first_k_dense_replace", None)
