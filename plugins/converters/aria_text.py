"""Aria's text decoder (`aria_text`, Rhymes AI): Llama's attention in layers whose FFN is a
mixture of SwiGLU experts of intermediate_size (the top-k router logits softmaxed, Mixtral's
order) plus one shared SwiGLU MLP moe_num_shared_experts x intermediate_size wide. Its
experts are stored in x @ W layout: fc1 (E, D, 2F) as [gate | up], fc2 (E, F, D)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import parse_fields, spec_parts

from .common import LM_HEAD, table
from .llama import ATTENTION_TENSORS, ROTARY_BUFFER, LlamaConverter
from .mixtral import aux_loss_coef, aux_loss_config, without_ffn_bias

ARIA_TENSORS = """
        layers.{i}.mlp.router                                   ROUTER
        layers.{i}.mlp.experts.fc1.weight                       EXPERTS_IN      tensor
        layers.{i}.mlp.experts.fc2.weight                       EXPERTS_OUT     tensor
        layers.{i}.mlp.shared_experts.(gate_proj,up_proj)       SHARED_UP       fuse
        layers.{i}.mlp.shared_experts.down_proj                 SHARED_DOWN
"""


class AriaTextConverter(LlamaConverter, model_type="aria_text", hf_prefix="AriaText"):
    # routed experts are always SiLU-gated; the shared MLP follows hidden_act: both SwiGLU
    fixed = {
        **LlamaConverter.fixed,
        **spec_parts("ffn: {kind: moe, expert: glu, activation: swiglu, router: topk_softmax}"),
    }
    fields = (
        *without_ffn_bias(LlamaConverter.fields),
        *parse_fields(
            """
            moe_num_experts             ffn.n_experts   8
            moe_topk                    ffn.top_k       2
            moe_num_shared_experts      ffn.n_shared    2
            """
        ),
    )
    tasks = {k: v for k, v in LlamaConverter.tasks.items() if k in ("Model", "ForCausalLM")}
    tensors = table(
        ATTENTION_TENSORS + ARIA_TENSORS, LM_HEAD, prefixes=("model.", ""), ignore=ROTARY_BUFFER
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Llama's rotary; the router loss only with output_router_logits."""
        super().adjust(spec, config)
        aux_loss_coef(spec, config)

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        super().adjust_config(config, spec)
        aux_loss_config(config, spec)
