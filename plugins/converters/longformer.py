"""Longformer: RoBERTa's layout under `longformer.` with sliding-window attention (a window
per layer), separate q/k/v projections for global rows, and the global tokens HF's task
models set by themselves (<s> for classification, the question for QA and multiple choice)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import ConversionError, get
from archzoo.specs.plan import layer_components, stack_config

from .bert import LAYERS, RobertaConverter
from .common import BERT_BUFFERS, BERT_EMBEDDINGS, table

GLOBAL = "encoder.layer.{i}.attention.self.(query_global,key_global,value_global)  " + (
    "Q_GLOBAL,K_GLOBAL,V_GLOBAL"
)
# head kind -> the global tokens HF's model of that task sets when given no global mask
DEFAULT_GLOBAL = {"classifier": "first", "question_answering": "before_sep"}
DEFAULT_GLOBAL["multiple_choice"] = "after_sep"


def attention_windows(config: Mapping[str, Any]) -> list[int]:
    """HF's `attention_window`: one even width per layer (an int means the same for all)."""
    n = get(dict(config), "num_hidden_layers")
    windows = get(dict(config), "attention_window", 512)
    windows = [windows] * n if isinstance(windows, int) else list(windows)
    if len(windows) != n or any(not isinstance(w, int) or w <= 0 or w % 2 for w in windows):
        raise ConversionError(
            f"config.json attention_window must be a positive even int or one per each of "
            f"{n} layers, got {config.get('attention_window')!r}"
        )
    return windows


class LongformerConverter(RobertaConverter, model_type="longformer", hf_prefix="Longformer"):
    requires = {}
    fixed = {
        **RobertaConverter.fixed,
        "attention": {
            "kind": "longformer",
            "bias": True,
            "global_projections": True,
            "zero_padded_queries": True,
        },
    }
    tensors = table(
        BERT_EMBEDDINGS + LAYERS + GLOBAL,
        prefixes=("longformer.", ""),
        stacks={"encoder": {}},
        ignore=BERT_BUFFERS,
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Positions after padding_idx (RoBERTa's), the most common window for the stack and
        `layers:` overrides for the others, and the task's default global tokens."""
        super().adjust(spec, config)
        windows = attention_windows(config)
        attention = spec["attention"]
        rule = DEFAULT_GLOBAL.get(spec["head"]["kind"], "none")
        if rule != "none":
            attention["default_global"] = rule
        if rule in ("before_sep", "after_sep"):
            attention["sep_token_id"] = get(config, "sep_token_id", 2)
        common = Counter(windows).most_common(1)[0][0]
        attention["window"] = common
        spec["layers"] = [
            {"select": [i for i, x in enumerate(windows) if x == w], "attention": {"window": w}}
            for w in sorted(set(windows) - {common})
        ]

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """RoBERTa's position keys, one window per layer, the separator the tasks look for."""
        super().adjust_config(config, spec)
        layers = layer_components(stack_config(dict(spec), "encoder"))
        config["attention_window"] = [layer["attention"].get("window") for layer in layers]
        sep = spec["attention"].get("sep_token_id")
        if sep is not None:
            config["sep_token_id"] = sep
