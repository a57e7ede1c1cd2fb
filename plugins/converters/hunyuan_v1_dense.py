"""HunYuan dense (Tencent Hunyuan-7B): Llama's layout with an RMSNorm over each head's queries
and keys applied after the rotation (qk_norm_after_position), and its `dynamic` rotary with a
fixed `alpha`, which only stretches the base: base * alpha ** (hd / (hd - 2))."""

from __future__ import annotations

from typing import Any

from archzoo.parts.converter import spec_parts

from .common import decoder_tasks, lm_task, table
from .llama import ATTENTION_TENSORS, MLP_TENSORS, ROTARY_BUFFER, LlamaConverter
from .rope import rope_parameters


class HunYuanDenseV1Converter(
    LlamaConverter, model_type="hunyuan_v1_dense", hf_prefix="HunYuanDenseV1"
):
    fixed = {
        **LlamaConverter.fixed,
        **spec_parts(
            "attention: {kind: mha, fused_qkv: false, qk_norm: head, qk_norm_after_position: true}"
        ),
    }
    tasks = {
        k: v
        for k, v in decoder_tasks("ForCausalLM", lm_task(False)).items()
        if k in ("Model", "ForCausalLM", "ForSequenceClassification")
    }
    tensors = table(
        ATTENTION_TENSORS
        + MLP_TENSORS
        + "layers.{i}.self_attn.(query_layernorm,key_layernorm)    Q_NORM,K_NORM\n",
        prefixes=("model.", ""),
        ignore=ROTARY_BUFFER,
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Llama's rotary; a `dynamic` one with `alpha` is a plain one on a stretched base
        (transformers' ntk_alpha: the frequencies do not depend on the length)."""
        params = {**(config.get("rope_scaling") or {}), **(config.get("rope_parameters") or {})}
        alpha = params.get("alpha")
        rope_type = params.get("rope_type", params.get("type"))
        if rope_type == "dynamic" and alpha:
            hd = spec["head_dim"]
            theta = params.get("rope_theta", config.get("rope_theta", 10000.0))
            base = theta * alpha ** (hd / (hd - 2))
            plain = {"rope_parameters": {"rope_type": "default", "rope_theta": base}}
            spec["position"] = {"kind": "rotary", **rope_parameters(plain)}
            return
        super().adjust(spec, config)
