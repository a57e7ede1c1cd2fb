"""Cohere Compass's text decoder (`cohere_compass_text`, the text half of North Vision):
Cohere 2's parallel layers and sliding windows, rotating by halves (for text alone its M-RoPE
sections are one ordinary rotary) by `rope_parameters` per layer type (null: that type sees no
positions), and a classifier pooling by `pooling`: the last real token (eos, the default), the
first (bos), or the mean of every token's scores."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import ConversionError, Field
from archzoo.specs.plan import layer_components, stack_config

from .cohere2 import Cohere2Converter
from .common import HEADLESS, TASK_LM, decoder_tasks, tie
from .common import task as make_task
from .gemma2 import sliding_layers
from .rope import rope_config, rope_parameters

# pooling -> (head pooling, whether the scores are pooled rather than the states)
POOLINGS = {"eos": ("last", False), "bos": ("cls", False), "mean": ("mean", True)}


def rotary(config: dict[str, Any], params: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """One layer type's rotary (halves, as transformers' rotate_half), or None (NoPE)."""
    if params is None:
        return None
    plain = {k: v for k, v in config.items() if k not in ("rope_parameters", "rope_scaling")}
    return {"kind": "rotary", **rope_parameters({**plain, "rope_parameters": dict(params)})}


class CohereCompassTextConverter(
    Cohere2Converter, model_type="cohere_compass_text", hf_prefix="CohereCompass"
):
    tasks = {  # CohereCompassModel and ...ForConditionalGeneration are the multimodal ones
        "ForCausalLM": make_task(
            "kind: lm", TASK_LM, fields=(tie(True), Field("logit_scale", "head.logit_scale", 1.0))
        ),
        "TextModel": HEADLESS,
        "TextForSequenceClassification": decoder_tasks("", HEADLESS)["ForSequenceClassification"],
    }

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Each layer type's rotary or none, its window, and the classifier's pooling."""
        kinds = config.get("layer_types") or ["full_attention"] * spec["n_layers"]
        params = config.get("rope_parameters") or {}
        if any(kind not in params for kind in kinds):
            raise ConversionError(
                f"config.json rope_parameters={params!r}: expected an entry (null: no rotary) "
                f"for each of layer_types {sorted(set(kinds))!r}"
            )
        full, local = (
            rotary(config, params.get(k)) for k in ("full_attention", "sliding_attention")
        )
        spec["position"] = full or local or {"kind": "none"}
        config = {**config, "layer_types": kinds}
        sliding_layers(spec, config, 1, local or {"kind": "none"}, global_positions=bool(full))
        how = config.get("pooling") or "eos"
        if spec["head"]["kind"] == "classifier" and how not in POOLINGS:
            raise ConversionError(f"config.json pooling={how!r} is not supported: eos, bos, mean")
        if spec["head"]["kind"] == "classifier":
            spec["head"]["pooling"], spec["head"]["pool_scores"] = POOLINGS[how]

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """The inverse of `adjust`: `rope_parameters` per layer type, `pooling`."""
        super().adjust_config(config, spec)
        params: dict[str, Any] = {}
        layers = layer_components(stack_config(dict(spec), "decoder"))
        for kind, parts in zip(config["layer_types"], layers, strict=True):
            moves = parts["attention"].get("use_position", True)
            params[kind] = rope_config(parts["position"]).get("rope_parameters") if moves else None
        config["rope_parameters"] = params
        head = spec.get("head") or {}
        chosen = (head.get("pooling"), bool(head.get("pool_scores")))
        names = {v: k for k, v in POOLINGS.items()}
        if head.get("kind") == "classifier" and chosen in names:
            config["pooling"] = names[chosen]
