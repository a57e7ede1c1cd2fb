"""BertGeneration (Rothe et al., 2020): BERT's post-LN layers without token types or pooler,
an encoder (`BertGenerationEncoder`) or, with is_decoder, a causal decoder under a linear LM
head with a bias (`BertGenerationDecoder`); cross-attention (add_cross_attention) refused."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from archzoo.parts.converter import ConversionError, TensorSource, spec_parts
from archzoo.parts.hf_tensors import TensorTable

from .bert import LAYERS, BertConverter, bert_fields
from .common import BERT_BUFFERS, BERT_EMBEDDINGS, HEADLESS, table, task, tie

BIAS = ("lm_head.bias", "lm_head.decoder.bias")  # one parameter, two names in transformers
EMBEDDING = spec_parts("embedding: {kind: token, norm: true, type_vocab_size: 0}")


class BertGenerationConverter(
    BertConverter, model_type="bert-generation", hf_prefix="BertGeneration"
):
    requires = {"add_cross_attention": False}
    fixed = {**BertConverter.fixed, **EMBEDDING}
    fields = tuple(f for f in bert_fields(dropout=0.1, activation="gelu") if "type" not in f.hf)
    tasks = {
        "Decoder": task("kind: lm, bias: true", "lm_head.decoder  LM_PROJ", fields=(tie(True),)),
        "Encoder": HEADLESS,
    }
    refused: dict[str, str] = {}
    tensors = table(
        BERT_EMBEDDINGS + LAYERS,
        prefixes=("bert.", ""),
        stacks={"encoder": {}},
        ignore=BERT_BUFFERS,
    )

    def base_table(self, spec: Mapping[str, Any] | None = None) -> TensorTable:
        """One stack, named by the family (`is_decoder`)."""
        base = super().base_table(spec)
        decoder = spec is not None and spec.get("family") == "decoder"
        return replace(base, stacks={"decoder": {}}) if decoder else base

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """A decoder where is_decoder says so; the LM head only on one."""
        super().adjust(spec, config)
        if config.get("is_decoder"):
            spec["family"] = "decoder"
        elif spec["head"]["kind"] == "lm":
            raise ConversionError(
                "config.json architectures=['BertGenerationDecoder'] with is_decoder=False (a "
                "bidirectional encoder under an LM head) is not supported; set is_decoder: true"
            )

    def export_tasks(self, spec: Mapping[str, Any]) -> list[str]:
        kind = (spec.get("head") or {}).get("kind")
        return {"lm": ["Decoder"], "none": ["Encoder"]}.get(kind, [])

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        super().adjust_config(config, spec)
        config.pop("position_embedding_type", None)  # BertGeneration's positions: absolute
        config["is_decoder"] = spec["family"] == "decoder"

    def import_state(
        self, src: TensorSource, config: dict[str, Any], names: Any, ctx: dict[str, Any]
    ) -> dict[str, Any]:
        """The LM head's bias under either of its names."""
        bias = src.take(BIAS[0]) if BIAS[0] in src.names() else None
        if bias is not None and BIAS[1] not in src.names():
            src.add(BIAS[1], bias)
        return super().import_state(src, config, names, ctx)

    def export_state(self, state: Any, names: Any, ctx: Any, prefix: Any = None, task: Any = None):
        """The table's tensors, the LM head's bias under its second name too."""
        out = super().export_state(state, names, ctx, prefix, task)
        if BIAS[1] in out:
            out[BIAS[0]] = out[BIAS[1]].clone()
        return out
