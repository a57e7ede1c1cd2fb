"""ELECTRA: BERT's encoder under `electra.`, an E-wide embedding projected to d_model when
E != d, the discriminator (replaced-token) head and the generator's MLM head."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import Field, get

from .bert import ABSOLUTE_ONLY, LAYERS, BertConverter, bert_fields
from .common import (
    ACTIVATION,
    AS_DECODER,
    BERT_BUFFERS,
    BERT_EMBEDDINGS,
    HEADLESS,
    QUESTION_ANSWERING,
    table,
    task,
    tie,
    token_classifier,
)

GELU = Field("hidden_act", "head.activation", "gelu", ACTIVATION)  # the discriminator's


class ElectraConverter(BertConverter, model_type="electra", hf_prefix="Electra"):
    requires = ABSOLUTE_ONLY
    fields = (
        *bert_fields(dropout=0.1, activation="gelu"),
        Field("embedding_size", "embedding.embedding_size"),
    )
    tasks = {
        "Model": HEADLESS,
        "ForPreTraining": task(
            "kind: discriminator",
            "discriminator_predictions.(dense,dense_prediction)  DISC_DENSE,DISC_PREDICTION",
            fields=(GELU,),
        ),
        "ForMaskedLM": task(  # the generator; its transform's GELU is fixed
            "kind: mlm, activation: gelu",
            """
            generator_predictions.dense         MLM_DENSE
            generator_predictions.LayerNorm     MLM_NORM
            generator_lm_head                   MLM_DECODER
            generator_lm_head.bias              MLM_BIAS    tensor
            """,
            fields=(tie(True),),
        ),
        # ElectraClassificationHead: dense + GELU on the first token, out_proj
        "ForSequenceClassification": task(
            "kind: classifier, pooling: cls, pooler: true, pooler_activation: gelu",
            "classifier.(dense,out_proj)  HEAD_POOLER,CLASSIFIER",
            labels=True,
        ),
        "ForTokenClassification": token_classifier(),
        "ForQuestionAnswering": QUESTION_ANSWERING,
        "ForMultipleChoice": task(  # the sequence summary: first token, dense, activation
            "kind: multiple_choice, pooling: cls, pooler: true",
            "sequence_summary.summary  HEAD_POOLER\nclassifier  CLASSIFIER",
            fields=(Field("summary_activation", "head.pooler_activation", "gelu", ACTIVATION),),
        ),
    }
    refused = {"ForCausalLM": AS_DECODER}
    tensors = table(
        BERT_EMBEDDINGS + "embeddings_project  EMBED_PROJECT\n" + LAYERS,
        prefixes=("electra.", ""),
        stacks={"encoder": {}},
        ignore=BERT_BUFFERS,
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """An embedding narrower than d_model is ALBERT's factorized one (E -> d projection)."""
        width = spec["embedding"].pop("embedding_size")
        if width != get(config, "hidden_size"):
            spec["embedding"].update(kind="factorized", embedding_size=width)

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """embedding_size: the factorized embedding's E, else d_model (the type's default
        may be neither: ELECTRA's 128)."""
        config["embedding_size"] = spec["embedding"].get("embedding_size") or spec["d_model"]
