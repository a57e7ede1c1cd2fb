"""ALBERT: BERT's post-LN encoder with a factorized embedding and layers shared across groups."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import ConversionError, Field, get, spec_parts

from .bert import BertConverter, bert_fields, mlm_activation
from .common import BERT_BUFFERS, BERT_EMBEDDINGS, encoder_tasks, mlm_task, table

GROUP = "encoder.albert_layer_groups.{i}.albert_layers.0."  # archzoo block i = HF group i


class AlbertConverter(BertConverter, model_type="albert", hf_prefix="Albert"):
    requires = {"inner_group_num": 1, "position_embedding_type": "absolute"}
    fixed = {
        **BertConverter.fixed,
        **spec_parts(
            "embedding: {kind: factorized, norm: true}, position: learned",
            "attention: {kind: mha, fused_qkv: false, bias: true}",
        ),
    }
    fields = (
        *bert_fields(dropout=0.0, activation="gelu_new"),
        Field("embedding_size", "embedding.embedding_size"),
    )
    tasks = encoder_tasks(
        "pooler", mlm_task("predictions.", "dense", "LayerNorm", mlm_activation("gelu_new"))
    )
    tensors = table(
        BERT_EMBEDDINGS
        + f"""
        encoder.embedding_hidden_mapping_in     EMBED_PROJECT
        {GROUP}attention.(query,key,value)      Q,K,V
        {GROUP}attention.dense                  ATTN_OUT
        {GROUP}attention.LayerNorm              ATTN_NORM
        {GROUP}ffn                              FC_IN
        {GROUP}ffn_output                       FC_OUT
        {GROUP}full_layer_layer_norm            FFN_NORM
        """,
        prefixes=("albert.", ""),
        stacks={"encoder": {}},
        # not part of an MLM model: the pooler and AlbertForPreTraining's sentence-order head
        ignore=(
            *BERT_BUFFERS,
            *(
                f"{m}.{p}"
                for m in ("pooler", "sop_classifier.classifier")
                for p in ("weight", "bias")
            ),
        ),
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """HF's num_hidden_groups as a sharing component ('all' for ALBERT's usual 1)."""
        n_layers, n_groups = get(config, "num_hidden_layers"), get(config, "num_hidden_groups", 1)
        if n_groups == 1:
            spec["sharing"] = {"kind": "all"}
            return
        if n_layers % n_groups:
            raise ConversionError(
                f"config.json num_hidden_groups={n_groups} does not divide "
                f"num_hidden_layers={n_layers}; only equal-sized groups are supported"
            )
        spec["sharing"] = {"kind": "groups", "n_groups": n_groups}

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """The sharing component as `num_hidden_groups`."""
        sharing = spec["sharing"]
        groups = {"all": 1, "groups": sharing.get("n_groups")}.get(sharing["kind"])
        if groups is not None:
            config["num_hidden_groups"] = groups
