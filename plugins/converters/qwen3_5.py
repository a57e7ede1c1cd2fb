"""Qwen3.5, text only (`qwen3_5_text`): Qwen3.5-MoE's layers (Gated DeltaNet with its
projections kept apart, gated attention every `full_attention` layer) with a dense SwiGLU
MLP on every layer."""

from __future__ import annotations

from typing import Any

from archzoo.parts.converter import Field, spec_parts

from .common import HEADLESS, PAD, SIZES, lm_task, task
from .llama import LlamaConverter
from .qwen3_next import MIXER_FIELDS, Qwen3NextConverter, attention_layers, write_layer_types
from .rope import rope_parameters


class Qwen3_5TextConverter(
    Qwen3NextConverter, model_type="qwen3_5_text", hf_prefix="Qwen3_5", default_task="ForCausalLM"
):
    fixed = spec_parts(
        "dropout: 0.0, embedding: token, block: pre_ln, norm: {kind: rmsnorm, offset: 1.0}",
        "attention: {kind: gated_deltanet}",
        "ffn: {kind: glu, activation: swiglu, bias: false}",
    )
    fields = (
        *SIZES,
        *MIXER_FIELDS,
        Field("head_dim", "head_dim", 256),
        *PAD,
    )
    tasks = {
        "TextModel": HEADLESS,
        "ForCausalLM": lm_task(False),
        "TextForSequenceClassification": task(
            "kind: classifier, pooling: last, pooler: false, bias: false",
            "score  CLASSIFIER",
            labels=True,
        ),
    }

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Rotary on a quarter of each head; gated attention on the `full_attention` layers."""
        spec["position"] = {"kind": "rotary", **rope_parameters(config, default_fraction=0.25)}
        attends, attention = attention_layers(config, spec["n_layers"])
        if attends:
            spec["layers"] = [{"select": sorted(attends), "attention": attention}]

    def adjust_config(self, config: dict[str, Any], spec: Any) -> None:
        LlamaConverter.adjust_config(self, config, spec)  # rotary; no experts
        write_layer_types(config, spec)

    def import_state(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return LlamaConverter.import_state(self, *args, **kwargs)  # nothing to regroup

    def export_state(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return LlamaConverter.export_state(self, *args, **kwargs)
