"""ERNIE (Baidu's ERNIE 1.0-3.0 in transformers): BERT's layout and heads under `ernie.`,
with a table of task types (`task_type_ids`, zeros when not given) added to the embeddings
when use_task_id is set."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import Field

from .bert import LAYERS, BertConverter
from .common import AS_DECODER, BERT_EMBEDDINGS, table


class ErnieConverter(BertConverter, model_type="ernie", hf_prefix="Ernie"):
    fields = (*BertConverter.fields, Field("task_type_vocab_size", "embedding.task_types", 3))
    refused = {**BertConverter.refused, "ForCausalLM": AS_DECODER}
    tensors = table(
        BERT_EMBEDDINGS + "embeddings.task_type_embeddings  TASK_TYPE\n" + LAYERS,
        prefixes=("ernie.", ""),
        stacks={"encoder": {}},
        ignore=BertConverter.tensors.ignore,
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """The task-type table only where use_task_id says transformers builds it."""
        if not config.get("use_task_id", False):
            spec["embedding"]["task_types"] = 0

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        tasks = spec["embedding"].get("task_types", 0)
        config["use_task_id"] = bool(tasks)
        config["task_type_vocab_size"] = tasks or 3
