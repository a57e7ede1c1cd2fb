"""MiniCPM3 (OpenBMB): DeepSeek-V2's latent attention with rotate-half rotary, a dense SwiGLU
MLP, and muP's three constants: token vectors times `scale_emb`, each sublayer's output times
`scale_depth / sqrt(n_layers)` before the residual add, and the LM head's input divided by
`hidden_size / dim_model_base`."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import Field, parse_fields, spec_parts

from .common import decoder_tasks, lm_task, table, with_defaults
from .deepseek import MLA_TENSORS, DeepseekV3Converter
from .llama import MLP_TENSORS, ROTARY_BUFFER

MOE_KEYS = ("n_routed_experts", "num_experts_per_tok", "moe_intermediate_size", "n_shared_experts")
MOE_KEYS += ("routed_scaling_factor", "n_group", "topk_group", "norm_topk_prob")


class MiniCPM3Converter(DeepseekV3Converter, model_type="minicpm3", hf_prefix="MiniCPM3"):
    fixed = {**DeepseekV3Converter.fixed, **spec_parts("ffn: {kind: glu, activation: swiglu}")}
    fields = (
        *with_defaults(
            (f for f in DeepseekV3Converter.fields if f.hf not in (*MOE_KEYS, "v_head_dim")),
            max_position_embeddings=32768,  # MiniCPM3Config's defaults
            rms_norm_eps=1e-5,
            kv_lora_rank=256,
            q_lora_rank=768,
            qk_nope_head_dim=64,
            qk_rope_head_dim=32,
        ),
        *parse_fields("scale_emb  embedding.multiplier  12.0"),
        Field(
            "v_head_dim",
            "attention.v_head_dim",
            lambda c: c["hidden_size"] // c["num_attention_heads"],
        ),
    )
    tasks = {
        k: v
        for k, v in decoder_tasks("ForCausalLM", lm_task(True)).items()
        if k in ("Model", "ForCausalLM", "ForSequenceClassification")
    }
    tensors = table(MLA_TENSORS + MLP_TENSORS, prefixes=("model.", ""), ignore=ROTARY_BUFFER)

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Rotate-half rotary (+ YaRN's scale), the residual scale and the logits' divisor."""
        super().adjust(spec, config)
        if "q_lora_rank" in config and config["q_lora_rank"] is None:  # stated: a plain q
            spec["attention"]["q_lora_rank"] = None  # (absent: the default 768)
        spec.pop("layers", None)
        spec["attention"]["latent_norm_eps"] = 1e-6  # MiniCPM3RMSNorm's default there
        spec["position"]["interleaved"] = False
        n = spec["n_layers"]
        depth = config.get("scale_depth")
        spec["block"] = {"kind": "pre_ln", "residual_scale": (depth or math.sqrt(n)) / math.sqrt(n)}
        if spec["head"]["kind"] == "lm":
            base = config.get("dim_model_base") or spec["d_model"]
            spec["head"]["logit_scale"] = base / spec["d_model"]

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """The inverse of `adjust`: scale_depth and dim_model_base from the scales."""
        super().adjust_config(config, spec)
        for key in ("rope_interleave", "first_k_dense_replace"):
            config.pop(key, None)
        n = spec["n_layers"]
        config["scale_depth"] = spec["block"].get("residual_scale", 1.0) * math.sqrt(n)
        head = spec.get("head") or {}
        if head.get("kind") == "lm":
            base = head.get("logit_scale", 1.0) * spec["d_model"]
            config["dim_model_base"] = round(base) if abs(base - round(base)) < 1e-6 else base
