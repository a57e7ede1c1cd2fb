"""OLMoE: Llama's layout with an RMSNorm over all heads' queries and over all keys (OLMo 2's
`qk_norm: full`) and softmax-routed SwiGLU experts of intermediate_size in every layer (top-k
weights renormalised only with norm_topk_prob); q/k/v clipping (clip_qkv) is refused."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import spec_parts

from .common import LM_HEAD, table
from .experts import GATE_UP_DOWN_PROJ
from .llama import ATTENTION_TENSORS, LlamaConverter
from .mixtral import (
    MOE_TENSORS,
    SWIGLU_EXPERTS,
    ExpertsConverter,
    aux_loss_coef,
    aux_loss_config,
    moe_fields,
)
from .qwen import QK_NORM_TENSORS


class OlmoeConverter(ExpertsConverter, LlamaConverter, model_type="olmoe", hf_prefix="Olmoe"):
    requires = {"hidden_act": "silu", "clip_qkv": None}
    per_expert = GATE_UP_DOWN_PROJ
    fixed = {
        **LlamaConverter.fixed,
        **spec_parts("attention: {kind: mha, fused_qkv: false, qk_norm: full}"),
        **SWIGLU_EXPERTS,
    }
    fields = moe_fields(LlamaConverter.fields, "norm_topk_prob  ffn.normalize  False")
    tasks = {k: v for k, v in LlamaConverter.tasks.items() if k in ("Model", "ForCausalLM")}
    tensors = table(
        ATTENTION_TENSORS + QK_NORM_TENSORS + MOE_TENSORS, LM_HEAD, prefixes=("model.", "")
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        super().adjust(spec, config)
        aux_loss_coef(spec, config)

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        super().adjust_config(config, spec)
        aux_loss_config(config, spec)
