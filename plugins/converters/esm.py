"""ESM (Rives et al.; Lin et al., 2022): a pre-LN protein encoder with a final norm, rotary
(ESM-2) or learned positions counted from padding_idx + 1 (ESM-1b), an optional embedding
norm, zeroed padding, and token dropout's inference scaling (mask tokens zeroed, rows times
0.88 / (1 - their masked share)). The contact-prediction head (a regression over every
layer's attention maps) is not imported; export writes it as transformers initialises it
(zeros), so a round trip keeps the logits, not the contact head."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from archzoo.parts.converter import Field, TensorSource, get, spec_parts

from .bert import BertConverter, RobertaConverter, mlm_activation
from .common import BERT_BUFFERS, mlm_task, table, task, token_classifier

CONTACT = ("contact_head.regression.weight", "contact_head.regression.bias")
ROTARY = (
    "rotary_embeddings.inv_freq",
    "encoder.layer.{i}.attention.self.rotary_embeddings.inv_freq",
)


class EsmConverter(RobertaConverter, model_type="esm", hf_prefix="Esm"):
    requires = {"is_folding_model": False, "is_decoder": False}
    fixed = {
        **BertConverter.fixed,
        **spec_parts("block: pre_ln, embedding: {kind: token, zero_padded: true}"),
    }
    fields = (
        *(f for f in RobertaConverter.fields if f.hf != "type_vocab_size"),
        Field("emb_layer_norm_before", "embedding.norm", False),
        Field("mask_token_id", "embedding.mask_token_id", None),
    )
    tasks = {
        "Model": task("kind: none", base="pooler.dense  HEAD_POOLER", pooler="pooler.dense.weight"),
        "ForMaskedLM": mlm_task("lm_head.", "dense", "layer_norm", mlm_activation("gelu")),
        "ForSequenceClassification": RobertaConverter.tasks["ForSequenceClassification"],
        "ForTokenClassification": token_classifier(),
    }
    tensors = table(
        """
        embeddings.word_embeddings                          WORD
        embeddings.position_embeddings                      POSITION
        embeddings.layer_norm                               EMBED_NORM
        encoder.layer.{i}.attention.self.(query,key,value)  QKV     fuse
        encoder.layer.{i}.attention.self.(query,key,value)  Q,K,V
        encoder.layer.{i}.attention.output.dense            ATTN_OUT
        encoder.layer.{i}.(attention.LayerNorm,LayerNorm)   ATTN_NORM,FFN_NORM
        encoder.layer.{i}.(intermediate.dense,output.dense) FC_IN,FC_OUT
        encoder.emb_layer_norm_after                        FINAL_NORM
        """,
        prefixes=("esm.", ""),
        stacks={"encoder": {}},
        ignore=(*BERT_BUFFERS, *CONTACT, *ROTARY),
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """No token types; rotary (ESM-2) or RoBERTa's counted positions; token dropout."""
        spec["embedding"]["type_vocab_size"] = 0
        if get(config, "position_embedding_type", "absolute") == "rotary":
            spec["position"] = {"kind": "rotary", "base": float(config.get("rope_theta", 10000.0))}
        else:
            super().adjust(spec, config)
        spec["embedding"]["token_dropout"] = 0.12 if config.get("token_dropout") else 0.0

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        rotary = spec["position"]["kind"] == "rotary"
        config["position_embedding_type"] = "rotary" if rotary else "absolute"
        if not rotary:
            super().adjust_config(config, spec)
        config["token_dropout"] = bool(spec["embedding"].get("token_dropout"))

    def import_state(
        self, src: TensorSource, config: dict[str, Any], names: Any, ctx: dict[str, Any]
    ) -> dict[str, Tensor]:
        """The layers' norms as transformers saves them (LayerNorm.gamma / .beta) renamed."""
        for name in list(src.names()):
            for old, new in (
                (".LayerNorm.gamma", ".LayerNorm.weight"),
                (".LayerNorm.beta", ".LayerNorm.bias"),
            ):
                if name.endswith(old):
                    src.add(name[: -len(old)] + new, src.take(name))
        return super().import_state(src, config, names, ctx)

    def export_state(
        self,
        state: Mapping[str, Tensor],
        names: Any,
        ctx: dict[str, Any],
        prefix: str | None = None,
        task: str | None = None,
    ) -> dict[str, Tensor]:
        """The table's tensors and a zero contact head (transformers builds it in every class)."""
        out = super().export_state(state, names, ctx, prefix, task)
        lead = self.export_prefix(task) if prefix is None else prefix
        n, dtype = ctx["n_layers"] * ctx["n_heads"], next(iter(out.values())).dtype
        out[lead + CONTACT[0]] = torch.zeros(1, n, dtype=dtype)
        out[lead + CONTACT[1]] = torch.zeros(1, dtype=dtype)
        return out
