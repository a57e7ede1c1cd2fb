"""RoFormer (Su et al., 2021): BERT's post-LN encoder with rotary positions on adjacent
query/key pairs (a saved sinusoid table of head_dim columns, computed here), ELECTRA's E-wide
embedding projected to d_model when E != d, a classifier whose dense layer applies the
model's activation, and a multiple-choice summary that reads the row's last place."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import ConversionError, Field, get, spec_parts

from .bert import LAYERS, BertConverter, bert_fields
from .common import ACTIVATION, AS_DECODER, BERT_BUFFERS, HEADLESS, table, task
from .electra import ElectraConverter
from .marian import SavedSinusoidsConverter

SUMMARY = {"summary_type": "last", "summary_use_proj": False, "summary_activation": None}


class RoFormerConverter(
    SavedSinusoidsConverter, ElectraConverter, model_type="roformer", hf_prefix="RoFormer"
):
    requires = {"is_decoder": False, "rotary_value": False}  # values rotating too: refused
    fixed = {**BertConverter.fixed, **spec_parts("position: {kind: rotary, interleaved: true}")}
    fields = (
        *bert_fields(dropout=0.1, activation="gelu"),
        Field("embedding_size", "embedding.embedding_size", lambda c: get(c, "hidden_size")),
    )
    tasks = {
        "Model": HEADLESS,  # no pooler; BERT's MLM, token and span heads
        **{k: BertConverter.tasks[k] for k in ("ForMaskedLM", "ForTokenClassification")},
        "ForQuestionAnswering": BertConverter.tasks["ForQuestionAnswering"],
        "ForSequenceClassification": task(  # dense + hidden_act on the first token, out_proj
            "kind: classifier, pooling: cls, pooler: true",
            "classifier.(dense,out_proj)  HEAD_POOLER,CLASSIFIER",
            labels=True,
            fields=(Field("hidden_act", "head.pooler_activation", "gelu", ACTIVATION),),
        ),
        "ForMultipleChoice": task(  # RoFormerConfig has no summary_* keys: hidden[:, -1]
            "kind: multiple_choice, pooling: end, pooler: false", "classifier  CLASSIFIER"
        ),
    }
    refused = {"ForCausalLM": AS_DECODER}
    saved_sinusoids = ("encoder",)
    tensors = table(
        """
        embeddings.word_embeddings          WORD
        embeddings.token_type_embeddings    TOKEN_TYPE
        embeddings.LayerNorm                EMBED_NORM
        embeddings_project                  EMBED_PROJECT
        """
        + LAYERS,
        prefixes=("roformer.", ""),
        stacks={"encoder": {}},
        ignore=(*BERT_BUFFERS, "encoder.embed_positions.weight"),
    )

    def sinusoid_width(self, spec: Mapping[str, Any]) -> int:
        return int(spec["d_model"]) // int(spec["n_heads"])  # the angles of one head

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """E != d_model: the factorized embedding (E -> d), as ELECTRA's; the plain summary."""
        super().adjust(spec, config)
        if spec["head"]["kind"] == "multiple_choice" and any(
            config.get(k) not in (None, v) for k, v in SUMMARY.items()
        ):
            raise ConversionError(f"config.json summary_*: RoFormer's summary is {SUMMARY} only")
