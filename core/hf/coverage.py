"""HF coverage: every model_type of the installed transformers, supported, refused or out of scope.

A type is text when transformers has a text class for it (causal or masked LM, seq2seq LM, a
text classification, QA, multiple-choice or pre-training head) and no vision, audio, video,
multimodal, time-series or other non-text class. A text type is supported when a converter
(or alias) is registered for it; otherwise refused, with the mechanism archzoo lacks where
a plugin names it (`MISSING_MECHANISMS`), or "not examined".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..parts.registry import Registry, get_registry

# transformers' auto mappings (MODEL_FOR_<NAME>_MAPPING_NAMES) of text classes
TEXT_TASKS = (
    "CAUSAL_LM",
    "MASKED_LM",
    "SEQ_TO_SEQ_CAUSAL_LM",
    "SEQUENCE_CLASSIFICATION",
    "TOKEN_CLASSIFICATION",
    "QUESTION_ANSWERING",
    "MULTIPLE_CHOICE",
    "NEXT_SENTENCE_PREDICTION",
    "PRETRAINING",
    "TEXT_ENCODING",
)
# task mappings of heads that sit on a text backbone, not another modality (JEV's decision
# head beside Qwen2 and Qwen3.5 checkpoints)
TEXT_BACKBONE_TASKS = ("DECISION",)
# a config key (or sub-config) naming one of these: inputs beyond text (pixels, audio, layout:
# LayoutLM's 2d positions, BROS's bbox; another model's hidden states: a speculative-decoding
# drafter's backbone_hidden_size)
MODALITY_WORDS = (
    "audio",
    "vision",
    "image",
    "visual",
    "vlm",
    "speech",
    "2d_position",
    "xpath",
    "bbox",
    "backbone",
)


@dataclass(frozen=True)
class Coverage:
    """One model_type: `supported`, `refused` or `out of scope`, and what says why."""

    model_type: str
    status: str
    detail: str

    def as_dict(self) -> dict[str, str]:
        return {"model_type": self.model_type, "status": self.status, "detail": self.detail}


def transformers_version() -> str:
    import transformers

    return str(transformers.__version__)


def _mappings() -> tuple[dict[str, Any], dict[str, Any]]:
    """transformers' task mappings: (text ones, every other one but the base-model mapping)."""
    from transformers.models.auto import modeling_auto

    text, other = {}, {}
    for name in dir(modeling_auto):
        if not (name.startswith("MODEL_FOR_") and name.endswith("_MAPPING_NAMES")):
            continue
        task = name.removeprefix("MODEL_FOR_").removesuffix("_MAPPING_NAMES")
        if task not in TEXT_BACKBONE_TASKS:
            (text if task in TEXT_TASKS else other)[task] = getattr(modeling_auto, name)
    return text, other


def scope(model_type: str, text: dict[str, Any], other: dict[str, Any]) -> str | None:
    """None for a text type; else why it is out of scope (its first non-text task class)."""
    for task, mapping in sorted(other.items()):
        if model_type in mapping:
            return f"{task.lower().replace('_', ' ')} ({_first(mapping[model_type])})"
    if not any(model_type in mapping for mapping in text.values()):
        return "no text LM or task class"
    return None


def other_inputs(model_type: str) -> str | None:
    """The first key of the type's config (or sub-config) that names an input beyond text."""
    from transformers import CONFIG_MAPPING

    cls = CONFIG_MAPPING[model_type]
    keys = list(getattr(cls, "sub_configs", None) or {})
    keys += list(getattr(cls, "__annotations__", {}))  # its declared fields, read without building
    try:
        keys += list(cls().to_dict())
    except Exception:  # noqa: BLE001 - a config class that needs arguments: its sub-configs
        pass
    return next((k for k in keys if any(w in k for w in MODALITY_WORDS)), None)


def _first(value: Any) -> str:
    return str(value[0] if isinstance(value, (list, tuple)) else value)


def coverage(registry: Registry | None = None) -> list[Coverage]:
    """A row for every model_type of the installed transformers, sorted by model_type."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
    from transformers.utils import logging

    reg = registry or get_registry()
    text, other = _mappings()
    rows = []
    level = logging.get_verbosity()
    logging.set_verbosity_error()  # default configs warn about their own token ids
    try:
        for model_type in sorted(CONFIG_MAPPING_NAMES):
            rows.append(_row(reg, model_type, text, other))
    finally:
        logging.set_verbosity(level)
    return rows


def _row(reg: Registry, model_type: str, text: dict[str, Any], other: dict[str, Any]) -> Coverage:
    """The coverage of one model_type."""
    if model_type in reg.model_types():
        return Coverage(model_type, "supported", _converter_of(reg, model_type))
    why_not_text = scope(model_type, text, other)
    if why_not_text is not None:
        return Coverage(model_type, "out of scope", why_not_text)
    key = other_inputs(model_type)
    if key is not None:
        return Coverage(model_type, "out of scope", f"inputs beyond text ({key})")
    return Coverage(model_type, "refused", reg.missing_mechanism(model_type))


def _converter_of(reg: Registry, model_type: str) -> str:
    conv = reg.converter(model_type)
    if conv.alias_of:
        note = f": {conv.alias.note}" if conv.alias.note else ""
        return f"alias of {conv.alias_of} ({conv.alias.of.__name__}){note}"
    return type(conv).__name__


def counts(rows: list[Coverage]) -> dict[str, int]:
    """How many rows of each status."""
    out = {"supported": 0, "refused": 0, "out of scope": 0}
    for row in rows:
        out[row.status] += 1
    return out
