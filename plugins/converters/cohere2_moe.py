"""Cohere 2 MoE: Cohere 2's parallel layers (rotating sliding ones, NoPE global ones; RMSNorms
with rms_norm_eps) whose FFN is SwiGLU experts (softmax over the top-k logits, or sigmoid
scores) beside shared experts added or averaged (moe's shared_combine); dense layers
(`mlp_layer_types`) are prefix_dense_intermediate_size wide, rotating when global too if
prefix_dense_sliding_window_pattern is 1."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import ConversionError, Values, parse_fields, spec_parts
from archzoo.specs.plan import layer_components, stack_config

from .cohere import CohereConverter
from .cohere2 import Cohere2Converter
from .common import layer_types, table
from .experts import GATE_UP_DOWN_PROJ
from .layer_windows import group_layers
from .llama import MLP_TENSORS, ROTARY_BUFFER
from .mixtral import MOE_TENSORS, ExpertsConverter, without_ffn_bias

KINDS = ("sliding_attention", "full_attention")
DENSE = {"kind": "glu", "activation": "swiglu"}
TENSORS = """
        embed_tokens                                        WORD
        layers.{i}.input_layernorm                          ATTN_NORM
        layers.{i}.self_attn.(q_proj,k_proj,v_proj,o_proj)  Q,K,V,ATTN_OUT
        norm                                                FINAL_NORM
        layers.{i}.mlp.shared_experts.(gate_proj,up_proj)   SHARED_UP       fuse
        layers.{i}.mlp.shared_experts.down_proj             SHARED_DOWN
"""


class Cohere2MoeConverter(
    ExpertsConverter, Cohere2Converter, model_type="cohere2_moe", hf_prefix="Cohere2Moe"
):
    per_expert = GATE_UP_DOWN_PROJ
    fixed = {
        **Cohere2Converter.fixed,
        **spec_parts("ffn: {kind: moe, expert: glu, activation: swiglu, aux_loss_coef: 0.0}"),
    }
    fields = (
        *without_ffn_bias(Cohere2Converter.fields),
        *parse_fields(
            """
            num_experts                         ffn.n_experts       8
            num_experts_per_tok                 ffn.top_k           2
            num_shared_experts                  ffn.n_shared        0
            norm_topk_prob                      ffn.normalize       True
            expert_selection_fn                 ffn.router          softmax     ROUTER
            shared_expert_combination_strategy  ffn.shared_combine  average     COMBINE
            """,
            ROUTER=Values({"softmax": "topk_softmax", "sigmoid": "sigmoid"}),
            COMBINE=Values({"sum": "sum", "average": "mean"}),
        ),
    )
    tensors = table(
        TENSORS + MLP_TENSORS + MOE_TENSORS, prefixes=("model.", ""), ignore=ROTARY_BUFFER
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Each layer's attention (window, positions) and FFN (routed or dense)."""
        CohereConverter.adjust(self, spec, config)
        if config.get("rms_norm_eps") is not None:
            spec["norm"] = {"kind": "rmsnorm", "eps": float(config["rms_norm_eps"])}
        n, moe = spec["n_layers"], spec["ffn"]
        moe["d_expert"] = spec["d_ff"]  # dense layers: prefix_dense_intermediate_size wide
        if not moe.get("n_shared"):  # the combination is unread without shared experts
            moe["shared_combine"] = "sum"
        spec["d_ff"] = int(config.get("prefix_dense_intermediate_size") or spec["d_ff"])
        kinds = layer_types(config, n, KINDS)  # Cohere2MoeConfig always writes them
        mlp = config.get("mlp_layer_types") or ["sparse"] * n
        if len(mlp) != n or set(mlp) - {"dense", "sparse"}:
            raise ConversionError(f"config.json mlp_layer_types={mlp!r}: not {n} dense/sparse")
        force = config.get("prefix_dense_sliding_window_pattern", 1) == 1
        parts = []
        for kind, ffn in zip(kinds, mlp, strict=True):
            attention = dict(spec["attention"])
            if kind == "sliding_attention":
                attention.update(kind="local", window=int(config["sliding_window"]))
            elif not (force and ffn == "dense"):
                attention["use_position"] = False
            parts.append({"attention": attention, "ffn": moe if ffn == "sparse" else DENSE})
        routed = [i for i, ffn in enumerate(mlp) if ffn == "sparse"]  # the stack's FFN: moe
        group_layers(spec, parts, among=routed or None)

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        super().adjust_config(config, spec)
        layers = layer_components(stack_config(dict(spec), "decoder"))
        dense = [c for c in layers if c["ffn"]["kind"] != "moe"]
        config["mlp_layer_types"] = ["dense" if c in dense else "sparse" for c in layers]
        moe = next((c["ffn"] for c in layers if c not in dense), {})
        config["intermediate_size"] = moe.get("d_expert") or spec["d_ff"]
        config["prefix_dense_intermediate_size"] = spec["d_ff"]
        if spec["norm"]["kind"] == "rmsnorm":
            config["rms_norm_eps"] = spec["norm"]["eps"]
        nope = any(not c["attention"].get("use_position", True) for c in dense)  # no force_rope
        config["prefix_dense_sliding_window_pattern"] = 2 if nope else 1
