"""GLM-4.5 (`glm4_moe`): DeepSeek-V3's experts (sigmoid routing with a correction bias, groups,
a shared expert, `first_k_dense_replace` dense layers) behind GQA attention with q/k/v biases
(`attention_bias`; never on o_proj), rotary on half of each head (halves, not pairs) and an
optional RMSNorm over each head's queries and keys (`use_qk_norm`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import Field, Values, parse_fields, spec_parts

from .common import table, with_defaults
from .deepseek import MOE_TENSORS, DeepseekV3Converter
from .llama import ATTENTION_TENSORS, MLP_TENSORS, ROTARY_BUFFER
from .qwen import QK_NORM_TENSORS
from .rope import rope_parameters

MLA_KEYS = ("attention_bias", "qk_rope_head_dim", "kv_lora_rank", "q_lora_rank")
MLA_KEYS += ("qk_nope_head_dim", "v_head_dim")


class Glm4MoeConverter(DeepseekV3Converter, model_type="glm4_moe", hf_prefix="Glm4Moe"):
    # with every layer dense (first_k_dense_replace = n_layers) its table holds a Llama or
    # Qwen2 spec exactly: those export as llama / qwen2 unless imported from glm4_moe
    layout_of = "llama"
    fixed = {
        **DeepseekV3Converter.fixed,
        **spec_parts("attention: {kind: mha, fused_qkv: false, out_bias: false}"),
    }
    fields = (
        *with_defaults(  # Glm4MoeConfig's defaults where they differ from DeepSeek-V3's
            (f for f in DeepseekV3Converter.fields if f.hf not in MLA_KEYS),
            max_position_embeddings=131072,
            rms_norm_eps=1e-5,
            n_routed_experts=128,
            moe_intermediate_size=1408,
            routed_scaling_factor=1.0,
            topk_group=1,
        ),
        *parse_fields(
            """
            attention_bias      attention.bias          False
            use_qk_norm         attention.qk_norm       False       QK_NORM
            """,
            QK_NORM=Values({False: "none", True: "head"}),
        ),
        Field("head_dim", "head_dim", lambda c: c["hidden_size"] // c["num_attention_heads"]),
        Field("num_key_value_heads", "attention.n_kv_heads", 8),
    )
    tasks = {k: v for k, v in DeepseekV3Converter.tasks.items() if k in ("Model", "ForCausalLM")}
    tensors = table(
        ATTENTION_TENSORS + QK_NORM_TENSORS + MLP_TENSORS + MOE_TENSORS,
        prefixes=("model.", ""),
        ignore=ROTARY_BUFFER,
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Rotary on half of each head (rotate-half order); the first dense layers."""
        spec["position"] = {"kind": "rotary", **rope_parameters(config, default_fraction=0.5)}
        dense = min(int(config.get("first_k_dense_replace", 1) or 0), spec["n_layers"])
        if dense:  # these layers keep a dense SwiGLU of intermediate_size
            spec["layers"] = [
                {"select": list(range(dense)), "ffn": {"kind": "glu", "activation": "swiglu"}}
            ]

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """DeepSeek-V3's (first_k_dense_replace) without its rope_interleave."""
        super().adjust_config(config, spec)
        config.pop("rope_interleave", None)
