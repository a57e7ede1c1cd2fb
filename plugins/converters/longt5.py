"""LongT5: T5 whose encoder attends block-locally (`local`) or block-locally plus one summary
key per global block (`transient-global`); the decoder and the tables are T5's."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from archzoo.parts.converter import Values, get
from archzoo.parts.hf_tensors import TensorTable, parse_rules

from .common import PATHS
from .t5 import T5Converter

ENCODER_ATTENTION = Values({"local": "block_local", "transient-global": "transient_global"})
HF_ATTENTION = {
    "block_local": "LocalSelfAttention",
    "transient_global": "TransientGlobalSelfAttention",
}
GLOBAL_PARTS = """
    {s}.block.0.layer.0.{attn}.global_relative_attention_bias   POSITION_GLOBAL
    {s}.block.{i}.layer.0.{attn}.global_input_layer_norm        GLOBAL_NORM
"""


def longt5_table(attention: str) -> TensorTable:
    """T5's table with the encoder's self-attention module named for `attention`."""
    t5 = T5Converter.tensors
    assert t5 is not None
    rules = tuple(
        replace(r, hf=tuple(h.replace(".0.SelfAttention.", ".0.{attn}.") for h in r.hf))
        for r in t5.rules
    )
    stacks = {
        "encoder": {**t5.stacks["encoder"], "attn": HF_ATTENTION[attention]},
        "decoder": {**t5.stacks["decoder"], "attn": "SelfAttention"},
    }
    return replace(t5, rules=rules + parse_rules(GLOBAL_PARTS, PATHS), stacks=stacks)


TABLES = {kind: longt5_table(kind) for kind in HF_ATTENTION}


def encoder_part(spec: Mapping[str, Any], key: str) -> Any:
    """The encoder stack's component `key` (its own section in an encoder-decoder)."""
    if spec.get("family") == "encoder-decoder":
        own = (spec.get("encoder") or {}).get(key)
        return own if own is not None else spec.get(key)
    return spec.get(key)


class LongT5Converter(T5Converter, model_type="longt5", hf_prefix="LongT5"):
    tasks = {k: T5Converter.tasks[k] for k in ("Model", "ForConditionalGeneration", "EncoderModel")}
    tensors = TABLES["block_local"]

    def base_table(self, spec: Mapping[str, Any] | None = None) -> TensorTable:
        kind = (encoder_part(spec, "attention") or {}).get("kind") if spec else None
        return TABLES.get(kind, self.tensors)

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """The encoder's attention and its windowed bias, from encoder_attention_type."""
        super().adjust(spec, config)
        key = "encoder_attention_type"
        kind = ENCODER_ATTENTION.read(get(config, key, "local"), key)
        spec["attention"] = {**spec["attention"], "eager": True}  # transformers' eager bits
        attention = {**spec["attention"], "kind": kind, "radius": get(config, "local_radius", 127)}
        if kind == "transient_global":
            attention["global_block"] = get(config, "global_block_size", 16)
        position = {**spec["position"], "kind": "t5_windowed"}
        position["global_table"] = kind == "transient_global"
        if spec["family"] == "encoder-decoder":
            spec.setdefault("encoder", {}).update(attention=attention, position=position)
        else:
            spec.update(attention=attention, position=position)

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        attention = encoder_part(spec, "attention") or {}
        kind = attention.get("kind")
        if kind in HF_ATTENTION:
            config["encoder_attention_type"] = ENCODER_ATTENTION.write(kind)
            config["local_radius"] = attention["radius"]
            if kind == "transient_global":
                config["global_block_size"] = attention["global_block"]
