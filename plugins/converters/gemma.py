"""Gemma: Llama weights with sqrt(d)-scaled embeddings, (1 + w) RMSNorm, GeGLU (tanh) and a
256-wide head_dim (multi-query attention in the 2B model)."""

from __future__ import annotations

from archzoo.parts.converter import Values, parse_fields, spec_parts

from .common import decoder_tasks, lm_task
from .llama import LlamaConverter

GATED = Values({"gelu_pytorch_tanh": "geglu_tanh", "gelu": "geglu", "silu": "swiglu"})


class GemmaConverter(LlamaConverter, model_type="gemma", hf_prefix="Gemma"):
    requires = {}
    fixed = {
        **LlamaConverter.fixed,
        **spec_parts(
            "embedding: {kind: token, scale: true, round_scale: true}",
            "norm: {kind: rmsnorm, offset: 1.0}",
            "ffn: {kind: glu, activation: geglu_tanh}",
        ),
    }
    fields = (
        *LlamaConverter.fields,
        *parse_fields(
            "hidden_activation|hidden_act    ffn.activation      gelu_pytorch_tanh   GATED",
            GATED=GATED,
        ),
    )
    tasks = decoder_tasks("ForCausalLM", lm_task(True), token="score")  # tied by default
