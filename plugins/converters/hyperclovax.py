"""HyperCLOVA X (Naver): Granite's multipliers with a norm after each sublayer as well as
before (peri-LN, `use_post_norm`), the logits multiplied by `logits_scaling` (Granite
divides), and the standard 1/sqrt(head_dim) score scale when attention_multiplier is unset."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .common import table, with_defaults
from .granite import GraniteConverter
from .llama import ATTENTION_TENSORS, MLP_TENSORS, ROTARY_BUFFER


class HyperCLOVAXConverter(GraniteConverter, model_type="hyperclovax", hf_prefix="HyperCLOVAX"):
    fields = with_defaults(GraniteConverter.fields, attention_multiplier=None)
    tensors = table(
        ATTENTION_TENSORS
        + MLP_TENSORS
        + """
        layers.{i}.post_norm1                   ATTN_OUT_NORM
        layers.{i}.post_norm2                   FFN_OUT_NORM
        """,
        prefixes=("model.", ""),
        ignore=ROTARY_BUFFER,
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Granite's parts, norms after the sublayers too, and the logits multiplied."""
        super().adjust(spec, config)
        if config.get("use_post_norm", True):
            spec["block"]["kind"] = "sandwich_ln"
        if spec["head"]["kind"] == "lm":
            spec["head"]["logit_scale"] = float(config.get("logits_scaling") or 1.0)

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        super().adjust_config(config, spec)
        config["use_post_norm"] = spec["block"]["kind"] == "sandwich_ln"
        head = spec.get("head") or {}
        if head.get("kind") == "lm":
            config["logits_scaling"] = head.get("logit_scale", 1.0)
