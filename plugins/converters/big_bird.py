"""BigBird: BERT's post-LN encoder under `bert.` with ITC block-sparse attention (or full
attention when `attention_type` is original_full), a bare Linear pooler and RoBERTa-style
sequence classification head."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from archzoo.parts.converter import ConversionError, Field, get

from .bert import LAYERS, BertConverter, bert_fields, mlm_activation
from .common import (
    ACTIVATION,
    AS_DECODER,
    BERT_BUFFERS,
    BERT_EMBEDDINGS,
    encoder_tasks,
    mlm_task,
    table,
    task,
)

_MLM = mlm_task(
    "cls.predictions.", "transform.dense", "transform.LayerNorm", mlm_activation("gelu_new")
)
# BigBirdForMaskedLM and ForPreTraining keep the base model's pooler, unused by the logits
MLM = replace(
    _MLM,
    head={**_MLM.head, "pooler": True},
    rules=(*task("kind: mlm", base="pooler  HEAD_POOLER").rules, *_MLM.rules),
    pooler="pooler.weight",
)
# the other heads' checkpoints hold the base model's pooler too, unused by them
UNUSED_POOLER = ("pooler.weight", "pooler.bias")
QA_REFUSAL = (
    "BigBirdForQuestionAnswering is not supported: its qa_classifier runs an intermediate "
    "+ output block before qa_outputs, and it masks the question tokens (up to the first "
    "sep_token_id) out of the span logits; archzoo's question_answering head has neither"
)


class BigBirdConverter(BertConverter, model_type="big_bird", hf_prefix="BigBird"):
    requires = {"is_decoder": False, "add_cross_attention": False}
    fields = (
        *bert_fields(dropout=0.1, activation="gelu_new"),
        Field("rescale_embeddings", "embedding.scale", False),
        Field("use_bias", "attention.bias", True),
    )
    tasks = encoder_tasks(
        "pooler",
        MLM,
        # BigBirdClassificationHead: dense + hidden_act on the first token, out_proj
        sequence=task(
            "kind: classifier, pooling: cls, pooler: true",
            "classifier.(dense,out_proj)  HEAD_POOLER,CLASSIFIER",
            labels=True,
            fields=(Field("hidden_act", "head.pooler_activation", "gelu_new", ACTIVATION),),
        ),
    )
    del tasks["ForQuestionAnswering"]
    refused = {"ForCausalLM": AS_DECODER, "ForQuestionAnswering": QA_REFUSAL}
    tensors = table(
        BERT_EMBEDDINGS + LAYERS,
        prefixes=("bert.", ""),
        stacks={"encoder": {}},
        ignore=(
            *BERT_BUFFERS,
            *UNUSED_POOLER,
            "cls.seq_relationship.weight",
            "cls.seq_relationship.bias",
        ),
    )

    def task_of(self, config: dict[str, Any], tensor_names: Sequence[str] = ()) -> str:
        """BertConverter's, refusing the question-answering head by its tensors as well when
        config.json names no architecture."""
        if not config.get("architectures") and any(
            n.startswith("qa_classifier.") for n in tensor_names
        ):
            raise ConversionError(QA_REFUSAL)
        return super().task_of(config, tensor_names)

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """block_sparse: HF's eval-mode ITC pattern (every random draw is block 0), dense at
        (5 + 2r) blocks or fewer, as HF falls back there; original_full: plain mha."""
        spec["attention"]["out_bias"] = True  # use_bias is q, k and v's only
        kind = get(config, "attention_type", "block_sparse")
        if kind == "original_full":  # BigBirdSelfAttention's eager matmul, scale, softmax
            spec["attention"].update(kind="mha", eager=True)
            return
        if kind != "block_sparse":
            raise ConversionError(
                f"config.json attention_type={kind!r}: expected 'block_sparse' or 'original_full'"
            )
        block, draws = get(config, "block_size", 64), get(config, "num_random_blocks", 3)
        spec["attention"].update(
            kind="bigbird",
            block=block,
            window_blocks=3,
            global_blocks=1,
            random_blocks=draws,
            random_draws="first_block",
            dense_upto=(5 + 2 * draws) * block,
        )

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """attention_type, block_size and num_random_blocks from the attention."""
        attention = spec["attention"]
        if attention["kind"] != "bigbird":
            config["attention_type"] = "original_full"
            return
        config.update(
            attention_type="block_sparse",
            block_size=attention["block"],
            num_random_blocks=attention["random_blocks"],
        )
