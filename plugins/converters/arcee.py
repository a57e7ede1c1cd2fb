"""Arcee (AFM): Llama's layout with a plain two-layer MLP (up, down) and squared ReLU."""

from __future__ import annotations

from archzoo.parts.converter import parse_fields, spec_parts

from .common import ACTIVATION, table
from .llama import ATTENTION_TENSORS, ROTARY_BUFFER, LlamaConverter

MLP_TENSORS = """
        layers.{i}.mlp.(up_proj,down_proj)                      FC_IN,FC_OUT
"""


class ArceeConverter(LlamaConverter, model_type="arcee", hf_prefix="Arcee"):
    requires = {}
    fixed = {**LlamaConverter.fixed, **spec_parts("ffn: {kind: mlp}")}
    fields = (
        *LlamaConverter.fields,
        *parse_fields("hidden_act  ffn.activation  relu2  ACTIVATION", ACTIVATION=ACTIVATION),
    )
    tensors = table(
        ATTENTION_TENSORS + MLP_TENSORS,
        prefixes=("model.", "transformer.", ""),
        ignore=ROTARY_BUFFER,
    )
