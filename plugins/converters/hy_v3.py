"""Hy3 (Tencent, `hy_v3`): Llama's attention with an RMSNorm over each head's queries and keys
(Apertus's), and DeepSeek-V3's routing without groups (sigmoid scores, a correction bias only
to choose, the top-k renormalised then times router_scaling_factor) over SwiGLU experts
beside a shared one, after the dense layers `mlp_layer_types` names. transformers adds the
shared expert in float32 (enable_moe_fp32_combine); archzoo in the activations' dtype, the
same sum in float32."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import ConversionError, parse_fields, spec_parts
from archzoo.specs.plan import layer_components, stack_config

from .common import LM_HEAD, table, with_defaults
from .experts import GATE_UP_DOWN_PROJ
from .llama import ATTENTION_TENSORS, MLP_TENSORS, ROTARY_BUFFER, LlamaConverter
from .mixtral import ExpertsConverter, without_ffn_bias
from .qwen import QK_NORM_TENSORS

HY_MOE_TENSORS = """
        layers.{i}.mlp.router.gate                      ROUTER
        layers.{i}.mlp.expert_bias                      SCORE_BIAS      tensor
        layers.{i}.mlp.experts.gate_up_proj             EXPERTS_IN      transpose   tensor
        layers.{i}.mlp.experts.down_proj                EXPERTS_OUT     transpose   tensor
        layers.{i}.mlp.shared_mlp.(gate_proj,up_proj)   SHARED_UP       fuse
        layers.{i}.mlp.shared_mlp.down_proj             SHARED_DOWN
"""
DENSE = {"kind": "glu", "activation": "swiglu"}


class HYV3Converter(ExpertsConverter, LlamaConverter, model_type="hy_v3", hf_prefix="HYV3"):
    requires = {"hidden_act": "silu", "mlp_bias": False}  # the shared expert has no bias
    per_expert = GATE_UP_DOWN_PROJ
    fixed = {
        **LlamaConverter.fixed,
        **spec_parts(
            "attention: {kind: mha, fused_qkv: false, qk_norm: head}",
            "ffn: {kind: moe, expert: glu, activation: swiglu, router: sigmoid, choice_bias: true,"
            " normalize: true, aux_loss_coef: 0.0, router_fp32: true, fp32_weights: true}",
        ),
    }
    fields = (
        *with_defaults(
            without_ffn_bias(LlamaConverter.fields),
            max_position_embeddings=131072,
            rms_norm_eps=1e-5,
        ),
        *parse_fields(
            """
            num_experts|num_local_experts   ffn.n_experts       192
            num_experts_per_tok             ffn.top_k           8
            moe_intermediate_size           ffn.d_expert        1536
            num_shared_experts              ffn.n_shared        1
            router_scaling_factor           ffn.routed_scale    2.826
            """
        ),
    )
    tasks = {k: v for k, v in LlamaConverter.tasks.items() if k in ("Model", "ForCausalLM")}
    tensors = table(
        ATTENTION_TENSORS + QK_NORM_TENSORS + MLP_TENSORS + HY_MOE_TENSORS,
        LM_HEAD,
        prefixes=("model.", ""),
        ignore=ROTARY_BUFFER,
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Llama's rotary, and a dense SwiGLU of intermediate_size on the `dense` layers."""
        super().adjust(spec, config)
        n = spec["n_layers"]
        kinds = config.get("mlp_layer_types") or ["dense"] * min(n, 1) + ["sparse"] * (n - 1)
        if len(kinds) != n or set(kinds) - {"dense", "sparse"}:
            raise ConversionError(f"config.json mlp_layer_types={kinds!r}: not {n} dense/sparse")
        dense = [i for i, kind in enumerate(kinds) if kind == "dense"]
        if dense:
            spec["layers"] = [{"select": dense, "ffn": dict(DENSE)}]

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        super().adjust_config(config, spec)
        layers = layer_components(stack_config(dict(spec), "decoder"))
        config["mlp_layer_types"] = [
            "sparse" if c["ffn"]["kind"] == "moe" else "dense" for c in layers
        ]
