"""EuroBERT: Llama's layout run bidirectionally as an encoder (RMSNorm, rotary, GQA, SwiGLU,
a final norm), a plain linear MLM decoder, and a classifier whose pooling is the first token,
the mean of the states or (`late`, the default) the mean of every token's scores."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import ConversionError, Field

from .common import HEADLESS, table, task, tie, token_classifier, with_defaults
from .llama import ATTENTION_TENSORS, MLP_TENSORS, ROTARY_BUFFER, LlamaConverter

# classifier_pooling -> (head pooling, whether the scores are pooled rather than the states)
POOLINGS = {"bos": ("cls", False), "mean": ("mean", False), "late": ("mean", True)}


class EuroBertConverter(LlamaConverter, model_type="eurobert", hf_prefix="EuroBert"):
    family = "encoder"
    fields = with_defaults(LlamaConverter.fields, rms_norm_eps=1e-5, max_position_embeddings=8192)
    tasks = {
        "Model": HEADLESS,
        "ForMaskedLM": task(  # lm_head: one Linear, its bias where mlp_bias says
            "kind: mlm, transform: false",
            "lm_head  MLM_DECODER\nlm_head.bias  MLM_BIAS  tensor",
            fields=(tie(False), Field("mlp_bias", "head.decoder_bias", False)),
        ),
        "ForSequenceClassification": task(  # dense + exact GELU, then the classifier
            "kind: classifier, pooler: true, pooler_activation: gelu",
            "dense  HEAD_POOLER\nclassifier  CLASSIFIER",
            labels=True,
        ),
        "ForTokenClassification": token_classifier(),
    }
    tensors = table(
        ATTENTION_TENSORS + MLP_TENSORS,
        prefixes=("model.", ""),
        stacks={"encoder": {}},
        ignore=ROTARY_BUFFER,
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Rotary as Llama's; the classifier's pooling from `classifier_pooling`."""
        super().adjust(spec, config)
        if spec["head"]["kind"] != "classifier":
            return
        how = config.get("classifier_pooling") or "late"
        if how not in POOLINGS:
            raise ConversionError(
                f"config.json classifier_pooling={how!r} is not supported; supported: "
                + ", ".join(POOLINGS)
            )
        spec["head"]["pooling"], spec["head"]["pool_scores"] = POOLINGS[how]

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        super().adjust_config(config, spec)
        head = spec.get("head") or {}
        if head.get("kind") == "classifier":
            chosen = (head.get("pooling"), bool(head.get("pool_scores")))
            names = {v: k for k, v in POOLINGS.items()}
            if chosen in names:  # another pooling: export's round trip names it
                config["classifier_pooling"] = names[chosen]
