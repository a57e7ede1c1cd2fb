"""Jamba (AI21, 2024): Mamba layers with RMS-normalised dt, B and C, and one GQA attention
layer in every `attn_layer_period` (no positions anywhere); every `expert_layer_period`-th
FFN a mixture of SwiGLU experts (softmax, then the top k, not renormalised), the others a
dense SwiGLU. The pattern is periodic: layer i attends when i % period == offset."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import ConversionError, Converter, Field, parse_fields, spec_parts
from archzoo.specs.plan import layer_components, stack_config

from .common import PAD, SIZES, decoder_tasks, integer_expand, layer_overrides, lm_task, table
from .experts import PerExpert
from .mixtral import ExpertsConverter

JAMBA_TENSORS = """
        embed_tokens                                            WORD
        layers.{i}.input_layernorm                              ATTN_NORM
        layers.{i}.self_attn.(q_proj,k_proj,v_proj,o_proj)      Q,K,V,ATTN_OUT
        layers.{i}.mamba.(in_proj,conv1d,out_proj)              MIXER_IN,MIXER_CONV,MIXER_OUT
        layers.{i}.mamba.(x_proj,dt_proj)                       MAMBA_X_PROJ,MAMBA_DT_PROJ
        layers.{i}.mamba.A_log                                  A_LOG       tensor
        layers.{i}.mamba.D                                      SSM_D       tensor
        layers.{i}.mamba.dt_layernorm.weight                    DT_NORM     tensor
        layers.{i}.mamba.b_layernorm.weight                     B_NORM      tensor
        layers.{i}.mamba.c_layernorm.weight                     C_NORM      tensor
        layers.{i}.pre_ff_layernorm                             FFN_NORM
        layers.{i}.feed_forward.(gate_proj,up_proj,down_proj)   GATE,UP,DOWN
        layers.{i}.feed_forward.router                          ROUTER
        layers.{i}.mlp.experts.gate_up_proj                     EXPERTS_IN  transpose   tensor
        layers.{i}.mlp.experts.down_proj                        EXPERTS_OUT transpose   tensor
        final_layernorm                                         FINAL_NORM
"""


def every(n: int, period: int, offset: int) -> list[int]:
    """The layers i < n with i % period == offset."""
    return [i for i in range(n) if i % period == offset]


def period_of(chosen: list[int], n: int, what: str) -> tuple[int, int]:
    """(period, offset) whose layers are exactly `chosen`; a ConversionError otherwise."""
    for period in range(1, n + 1):
        for offset in range(period):
            if every(n, period, offset) == chosen:
                return period, offset
    raise ConversionError(
        f"the {what} layers {chosen} are not every period-th layer from an offset, the only "
        "pattern Jamba's config can say"
    )


class JambaConverter(
    ExpertsConverter, Converter, model_type="jamba", hf_prefix="Jamba", family="decoder"
):
    per_expert = PerExpert.under("feed_forward.experts.{e}", "gate_proj", "up_proj", "down_proj")
    requires = {"hidden_act": "silu"}
    fixed = spec_parts(
        "dropout: 0.0, embedding: token, position: none, block: pre_ln, norm: rmsnorm",
        "attention: {kind: mamba, inner_norms: true}",
        "ffn: {kind: glu, activation: swiglu, bias: false}",
    )
    fields = (
        *SIZES,
        *parse_fields(
            """
            max_position_embeddings     max_len                             262144
            attention_dropout           attention_dropout                   0.0
            rms_norm_eps                norm.eps,attention.norm_eps         1e-6
            mamba_d_state               attention.state_size                16
            mamba_d_conv                attention.conv_kernel               4
            mamba_conv_bias             attention.conv_bias                 True
            mamba_proj_bias             attention.bias                      False
            """
        ),
        Field("mamba_expand", "attention.d_inner", 2),  # read and written by adjust
        Field("mamba_dt_rank", "attention.dt_rank", "auto"),
        *PAD,
    )
    tasks = decoder_tasks("ForCausalLM", lm_task(False), token="score")
    tensors = table(JAMBA_TENSORS, prefixes=("model.", ""))

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """The mixer's sizes, and per layer its mixer (attention every attn_layer_period)
        and its FFN (experts every expert_layer_period)."""
        hidden, n = config["hidden_size"], spec["n_layers"]
        mixer = spec["attention"]
        mixer["d_inner"] = int(config.get("mamba_expand", 2)) * hidden
        rank = config.get("mamba_dt_rank", "auto")
        mixer["dt_rank"] = math.ceil(hidden / 16) if rank == "auto" else int(rank)
        attention = {
            "kind": "mha",
            "fused_qkv": False,
            "bias": False,
            "n_kv_heads": config.get("num_key_value_heads") or config["num_attention_heads"],
        }
        coef = float(config.get("router_aux_loss_coef") or 0.0)
        experts = {
            "kind": "moe",
            "expert": "glu",
            "activation": "swiglu",
            "router": "softmax_topk",
            "normalize": False,
            "n_experts": int(config.get("num_experts", 16)),
            "top_k": int(config.get("num_experts_per_tok", 2)),
            "aux_loss_coef": coef if config.get("output_router_logits") else 0.0,
        }
        attends = set(
            every(n, config.get("attn_layer_period", 8), config.get("attn_layer_offset", 4))
        )
        routed = set(
            every(n, config.get("expert_layer_period", 2), config.get("expert_layer_offset", 1))
        )
        layer_overrides(spec, attention, attends, experts, routed)

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """The inverse of `adjust`: periods and offsets of the attention and expert layers."""
        n, mixer = spec["n_layers"], spec["attention"]
        d = spec["d_model"]
        config["mamba_expand"] = integer_expand(mixer["d_inner"], d, "JambaConfig", "mamba_expand")
        config["mamba_dt_rank"] = mixer["dt_rank"]
        layers = layer_components(stack_config(dict(spec), "decoder"))
        attends = [i for i, c in enumerate(layers) if c["attention"]["kind"] == "mha"]
        routed = [i for i, c in enumerate(layers) if c["ffn"]["kind"] == "moe"]
        period, offset = period_of(attends, n, "attention")
        config["attn_layer_period"], config["attn_layer_offset"] = period, offset
        period, offset = period_of(routed, n, "expert")
        config["expert_layer_period"], config["expert_layer_offset"] = period, offset
        att = next((layers[i]["attention"] for i in attends), None)
        config["num_key_value_heads"] = att["n_kv_heads"] if att else spec["n_heads"]
        moe = next((layers[i]["ffn"] for i in routed), None)
        if moe is not None:
            config["num_experts"], config["num_experts_per_tok"] = moe["n_experts"], moe["top_k"]
            coef = float(moe.get("aux_loss_coef") or 0.0)
            config["output_router_logits"] = coef > 0
            if coef > 0:
                config["router_aux_loss_coef"] = coef
