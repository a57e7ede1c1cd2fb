"""UltraBERT (`ultrabert`): EuroBERT's bidirectional Llama layout with sliding-window layers
(|q - k| <= sliding_window; every third layer global by default) whose rotary base is their
own (rope_parameters per layer type), a masked-LM head through a two-layer tanh-GELU bottleneck
with no norm (mlm's `bottleneck`), and ModernBERT's classifiers without their prediction head."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.component import config_defaults
from archzoo.parts.converter import ConversionError, Field
from archzoo.specs.plan import layer_components, stack_config

from ..position.rotary import RotaryPosition
from .common import HEADLESS, QUESTION_ANSWERING, table, task, tie, token_classifier, with_defaults
from .eurobert import EuroBertConverter
from .gemma2 import sliding_config, sliding_layers
from .gemma3 import gemma3_rotary
from .llama import ATTENTION_TENSORS, MLP_TENSORS, ROTARY_BUFFER, LlamaConverter
from .rope import rope_config

BASES = (2_560_000.0, 10_000.0)  # UltrabertConfig's full and sliding rotary bases
POOLINGS = {"cls": "cls", "mean": "mean"}  # classifier_pooling -> the head's pooling


class UltrabertConverter(EuroBertConverter, model_type="ultrabert", hf_prefix="Ultrabert"):
    fields = with_defaults(LlamaConverter.fields, max_position_embeddings=32768)
    tasks = {
        "Model": HEADLESS,
        "ForMaskedLM": task(
            "kind: mlm, activation: gelu_tanh, dense_bias: false, decoder_bias: false",
            "head.(linear1,linear2)  MLM_DENSE,MLM_DENSE_OUT\ncls|head.decoder  MLM_DECODER",
            fields=(tie(False), Field("prediction_head_size", "head.bottleneck", 768)),
        ),
        "ForSequenceClassification": task(
            "kind: classifier, pooler: false", "classifier  CLASSIFIER", labels=True
        ),
        "ForTokenClassification": token_classifier(),
        "ForQuestionAnswering": QUESTION_ANSWERING,
    }
    tensors = table(  # the checkpoints' own prefix first (transformers renames it model.)
        ATTENTION_TENSORS + MLP_TENSORS,
        prefixes=("ultrabert.", "model.", ""),
        stacks={"encoder": {}},
        ignore=ROTARY_BUFFER,
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Each layer type's rotary, the sliding layers, the classifier's pooling."""
        glob, local = gemma3_rotary(config, ("rope_theta", "rope_theta"), BASES)
        spec["position"] = {"kind": "rotary", **glob}
        n = spec["n_layers"]
        kinds = config.get("layer_types") or [
            "sliding_attention" if (i + 1) % 3 else "full_attention" for i in range(n)
        ]
        window = int(config.get("sliding_window") or 128) + 1  # archzoo's: |q - k| < window
        local = {"kind": "rotary", **config_defaults(RotaryPosition), **local}
        types = {**config, "layer_types": kinds, "sliding_window": window}
        sliding_layers(spec, types, 3, local_position=local)
        if spec["head"]["kind"] == "classifier":
            how = config.get("classifier_pooling") or "cls"
            if how not in POOLINGS:
                raise ConversionError(f"config.json classifier_pooling={how!r}: not cls or mean")
            spec["head"]["pooling"] = POOLINGS[how]

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """`layer_types`, `sliding_window`, each layer type's rotary and the pooling."""
        sliding_config(config, spec)
        window = config.pop("sliding_window")
        config["sliding_window"] = window - 1 if window else 128
        layers = layer_components(stack_config(dict(spec), self.family))
        by_type = dict(zip(config["layer_types"], (c["position"] for c in layers), strict=True))
        config["rope_parameters"] = {
            kind: rope_config(position).get("rope_parameters") for kind, position in by_type.items()
        }
        head = spec.get("head") or {}
        if head.get("kind") == "classifier":
            config["classifier_pooling"] = head.get("pooling")
