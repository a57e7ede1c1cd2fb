"""Granite (IBM, 3.x): Llama's layout with four constant multipliers: token vectors
(`embedding_multiplier`), each sublayer's output before the residual add
(`residual_multiplier`), the attention score scale (`attention_multiplier`, in place of
1/sqrt(head_dim)) and the logits (divided by `logits_scaling`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import parse_fields

from .common import decoder_tasks, lm_task
from .llama import LlamaConverter


class GraniteConverter(LlamaConverter, model_type="granite", hf_prefix="Granite"):
    fields = (
        *LlamaConverter.fields,
        *parse_fields(
            """
            embedding_multiplier    embedding.multiplier    1.0
            residual_multiplier     block.residual_scale    1.0
            attention_multiplier    attention.scale         1.0
            """
        ),
    )
    tasks = {
        k: v
        for k, v in decoder_tasks("ForCausalLM", lm_task(False)).items()
        if k in ("Model", "ForCausalLM")
    }

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Llama's rotary, and the LM head's logits divided by logits_scaling."""
        super().adjust(spec, config)
        if spec["head"]["kind"] == "lm":
            spec["head"]["logit_scale"] = 1.0 / float(config.get("logits_scaling") or 1.0)

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        super().adjust_config(config, spec)
        head = spec.get("head") or {}
        if head.get("kind") == "lm":
            config["logits_scaling"] = 1.0 / head.get("logit_scale", 1.0)
