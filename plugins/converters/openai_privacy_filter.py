"""OpenAI's Privacy Filter (`openai_privacy_filter`): GPT-OSS's layers run bidirectionally as
a token-labelling encoder. Every layer attends to the keys within `sliding_window` of it on
either side, with per-head sinks; rotary turns adjacent pairs (YaRN by default); the experts'
fused gate/up holds [gate | up] halves (GPT-OSS alternates them). Its router's top-k
softmax divided by k, then the experts' sum times k, is GPT-OSS's routing."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import ConversionError, parse_fields

from .common import HEADLESS, table, token_classifier
from .gpt_oss import GPT_OSS_TENSORS, GptOssConverter
from .llama import ATTENTION_TENSORS


class OpenAIPrivacyFilterConverter(
    GptOssConverter, model_type="openai_privacy_filter", hf_prefix="OpenAIPrivacyFilter"
):
    family = "encoder"
    fields = (*GptOssConverter.fields, *parse_fields("sliding_window  attention.window  128"))
    tasks = {"Model": HEADLESS, "ForTokenClassification": token_classifier("score")}
    tensors = table(
        ATTENTION_TENSORS + GPT_OSS_TENSORS.replace("deinterleave    tensor", "tensor"),
        prefixes=("model.", ""),
        stacks={"encoder": {}},
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """GPT-OSS's rotary (on adjacent pairs) and router loss; every layer windowed, the
        window |q - k| <= sliding_window (archzoo's |q - k| < window)."""
        if config.get("layer_types") is not None:
            raise ConversionError(
                "config.json layer_types: the Privacy Filter windows every layer; per-layer "
                "attention types are not part of this type"
            )
        super().adjust(spec, {**config, "layer_types": None})
        spec["position"]["interleaved"] = True
        spec["attention"]["kind"] = "local"
        spec["attention"]["window"] += 1

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """GPT-OSS's keys without `layer_types` (every layer windowed); the window back."""
        super().adjust_config(config, spec)
        config.pop("layer_types", None)
        config["sliding_window"] = spec["attention"]["window"] - 1
