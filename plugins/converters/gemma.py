"""Gemma: Llama weights with sqrt(d)-scaled embeddings, (1 + w) RMSNorm, GeGLU (tanh) and a
256-wide head_dim (multi-query attention in the 2B model)."""

from __future__ import annotations

from archzoo.converter import Values, parse_fields, spec_parts

from .llama import LlamaConverter

GATED = Values({"gelu_pytorch_tanh": "geglu_tanh", "gelu": "geglu", "silu": "swiglu"})


class GemmaConverter(LlamaConverter):
    model_type = "gemma"
    requires = {}
    fixed = {
        **LlamaConverter.fixed,
        **spec_parts(
            "embedding: {kind: token, scale: true}",
            "norm: {kind: rmsnorm, offset: 1.0}",
            "ffn: {kind: glu, activation: geglu_tanh}",
        ),
    }
    fields = (
        *(f for f in LlamaConverter.fields if f.hf != "tie_word_embeddings"),
        *parse_fields(
            """
            hidden_activation|hidden_act    ffn.activation      gelu_pytorch_tanh   GATED
            tie_word_embeddings             head.tie            True
            """,
            GATED=GATED,
        ),
    )
