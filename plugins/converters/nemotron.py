"""Nemotron (Minitron): Llama's tensor names with a plain MLP (up, down) and squared ReLU,
LayerNorms that scale by (1 + weight) and carry a bias, and rotary on half of each head."""

from __future__ import annotations

from typing import Any

from archzoo.parts.converter import parse_fields, spec_parts

from .arcee import MLP_TENSORS
from .common import ACTIVATION, table
from .llama import ATTENTION_TENSORS, ROTARY_BUFFER, LlamaConverter
from .rope import rope_parameters


class NemotronConverter(LlamaConverter, model_type="nemotron", hf_prefix="Nemotron"):
    requires = {}
    fixed = {
        **LlamaConverter.fixed,
        **spec_parts("norm: {kind: layernorm, offset: 1.0, bias: true}", "ffn: {kind: mlp}"),
    }
    fields = (
        *(f for f in LlamaConverter.fields if f.hf != "rms_norm_eps"),
        *parse_fields(
            """
            norm_eps        norm.eps            1e-5
            hidden_act      ffn.activation      relu2   ACTIVATION
            """,
            ACTIVATION=ACTIVATION,
        ),
    )
    tensors = table(
        ATTENTION_TENSORS + MLP_TENSORS,
        prefixes=("model.", "transformer.", ""),
        ignore=ROTARY_BUFFER,
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Rotary base and share (half of each head unless the config says otherwise)."""
        spec["position"] = {"kind": "rotary", **rope_parameters(config, default_fraction=0.5)}
