"""Flint: Qwen3-MoE's attention (per-head QK RMSNorm) with a sink logit per head (softmax_offset);
sliding layers (`layer_types`) alone rotate. Experts by the top-k sigmoid scores (no bias) beside
an ungated shared SwiGLU; `mlp_only_layers` dense; RMSNorm weights multiplied in float32."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import spec_parts
from archzoo.specs.plan import layer_components, stack_config

from .common import LM_HEAD, table, with_defaults
from .experts import GATE_UP_DOWN_PROJ
from .gemma2 import sliding_config, sliding_layers
from .llama import ATTENTION_TENSORS, MLP_TENSORS, LlamaConverter
from .mixtral import MOE_TENSORS, ExpertsConverter, aux_loss_coef, aux_loss_config, moe_fields
from .qwen import QK_NORM_TENSORS

FLINT = """
        layers.{i}.self_attn.softmax_offset                 SINKS           tensor
        layers.{i}.mlp.shared_expert.(gate_proj,up_proj)    SHARED_UP       fuse
        layers.{i}.mlp.shared_expert.down_proj              SHARED_DOWN
"""
DENSE = {"kind": "glu", "activation": "swiglu"}


class FlintConverter(ExpertsConverter, LlamaConverter, model_type="flint", hf_prefix="Flint"):
    attention_impl = "eager"  # transformers has no SDPA path for the sinks
    per_expert = GATE_UP_DOWN_PROJ
    fixed = {
        **LlamaConverter.fixed,
        **spec_parts(
            "norm: {kind: rmsnorm, scale_fp32: true}",
            "attention: {kind: mha, fused_qkv: false, qk_norm: head, sinks: true}",
            "ffn: {kind: moe, expert: glu, activation: swiglu, router: sigmoid, n_shared: 1,"
            " router_fp32: true, fp32_weights: true}",  # no correction bias
        ),
    }
    fields = moe_fields(
        with_defaults(LlamaConverter.fields, max_position_embeddings=262144),
        """
        moe_intermediate_size               ffn.d_expert        512
        shared_expert_intermediate_size     ffn.d_shared        1024
        norm_topk_prob                      ffn.normalize       True
        """,
    )
    tasks = {k: v for k, v in LlamaConverter.tasks.items() if k in ("Model", "ForCausalLM")}
    tensors = table(
        ATTENTION_TENSORS + QK_NORM_TENSORS + MLP_TENSORS + MOE_TENSORS + FLINT,
        LM_HEAD,
        prefixes=("model.", ""),
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Rotary on the sliding layers only; the router loss; the dense layers."""
        super().adjust(spec, config)
        aux_loss_coef(spec, config)
        n = spec["n_layers"]
        kinds = config.get("layer_types") or [
            "full_attention" if i < 2 or i % 4 == 1 or i == n - 1 else "sliding_attention"
            for i in range(n)
        ]
        config = {"sliding_window": 513, **config, "layer_types": kinds}
        sliding_layers(spec, config, 1, global_positions=False)
        only = set(config.get("mlp_only_layers", (0, 1)) or ())  # FlintConfig's default
        step = int(config.get("decoder_sparse_step") or 1)
        dense = [i for i in range(n) if i in only or (i + 1) % step]
        if dense:  # these layers keep a dense SwiGLU of intermediate_size
            spec.setdefault("layers", []).append({"select": dense, "ffn": DENSE})

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        super().adjust_config(config, spec)
        aux_loss_config(config, spec)
        sliding_config(config, spec)
        config["sliding_window"] = config["sliding_window"] or 513  # an unread default
        layers = layer_components(stack_config(dict(spec), "decoder"))
        config["decoder_sparse_step"] = 1
        config["mlp_only_layers"] = [i for i, c in enumerate(layers) if c["ffn"]["kind"] != "moe"]
