"""Kimi Linear (Moonshot AI, 2025): Kimi Delta Attention (`kimi_delta`) on the
`linear_attention` layers and latent attention (MLA, no positions anywhere) on the
`full_attention` ones; DeepSeek-V3's experts (sigmoid scores, group-limited choice with a
correction bias, renormalised and scaled, one shared expert) on the `sparse` layers of
`mlp_layer_types`, a dense SwiGLU on the `dense` ones.

transformers saves the original checkpoint names (the decay projections beside the
attention, a convolution per q, k and v, `block_sparse_moe` with one w1/w3/w2 per expert);
import reads those or transformers' own, export writes transformers' own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from archzoo.parts.converter import (
    ConversionError,
    Converter,
    TensorSource,
    parse_fields,
    spec_parts,
)
from archzoo.parts.hf_tensors import ZooNames
from archzoo.specs.plan import layer_components, stack_config

from .common import HEADLESS, PAD, SIZES, layer_overrides, layer_types, lm_task, table
from .deepseek import MLA_TENSORS, MOE_TENSORS
from .experts import PerExpert
from .llama import MLP_TENSORS
from .mixtral import ExpertsConverter

KDA_TENSORS = """
        layers.{i}.self_attn.(k_proj,v_proj,conv1d,o_norm)      K,V,MIXER_CONV,MIXER_NORM
        layers.{i}.self_attn.forget_gate.(f_a_proj,f_b_proj)    KDA_F_A,KDA_F_B
        layers.{i}.self_attn.forget_gate.A_log                  A_LOG       tensor
        layers.{i}.self_attn.forget_gate.dt_bias                DT_BIAS     tensor
        layers.{i}.self_attn.(b_proj,g_a_proj,g_b_proj)         KDA_B,KDA_G_A,KDA_G_B
"""
KINDS = ("linear_attention", "full_attention")
GATE_PARTS = ("f_a_proj.weight", "f_b_proj.weight", "dt_bias", "A_log")


def default_kinds(config: Mapping[str, Any], n: int) -> list[str | None]:
    """Without `layer_types`: the checkpoint's 1-indexed `linear_attn_config` lists, else
    transformers' default (full attention on every 4th layer after the first)."""
    linear = config.get("linear_attn_config") or {}
    if "full_attn_layers" in linear and "kda_layers" in linear:
        kinds: list[str | None] = [None] * n
        for i in linear["full_attn_layers"]:
            kinds[i - 1] = KINDS[1]
        for i in linear["kda_layers"]:
            kinds[i - 1] = KINDS[0]
        return kinds
    return [KINDS[1] if i and i % 4 == 0 else KINDS[0] for i in range(n)]


class KimiLinearConverter(
    ExpertsConverter, Converter, model_type="kimi_linear", hf_prefix="KimiLinear", family="decoder"
):
    requires = {"hidden_act": "silu"}
    per_expert = PerExpert.under("mlp.experts.{e}", "w1", "w3", "w2")
    fixed = spec_parts(
        "dropout: 0.0, embedding: token, position: none, block: pre_ln, norm: rmsnorm",
        "attention: {kind: kimi_delta}",
        "ffn: {kind: moe, expert: glu, activation: swiglu, router: sigmoid, choice_bias: true,"
        " aux_loss_coef: 0.0, router_fp32: true, fp32_weights: true}",
    )
    fields = (
        *SIZES,
        *parse_fields(
            """
            model_max_length|max_position_embeddings    max_len                     1048576
            attention_dropout                           attention_dropout           0.0
            rms_norm_eps                                norm.eps,attention.norm_eps 1e-5
            qk_rope_head_dim                            head_dim                    64
            linear_num_heads                            attention.n_heads           32
            linear_head_dim                             attention.head_dim          128
            linear_conv_kernel_dim                      attention.conv_kernel       4
            num_experts|num_local_experts               ffn.n_experts               256
            num_experts_per_token|num_experts_per_tok   ffn.top_k                   8
            moe_intermediate_size                       ffn.d_expert                1024
            num_shared_experts|n_shared_experts         ffn.n_shared                1
            routed_scaling_factor                       ffn.routed_scale            2.446
            num_expert_group|n_group                    ffn.n_groups                1
            topk_group                                  ffn.topk_groups             1
            moe_renormalize|norm_topk_prob              ffn.normalize               True
            """
        ),
        *PAD,
    )
    tasks = {"Model": HEADLESS, "ForCausalLM": lm_task(False)}
    tensors = table(MLA_TENSORS + KDA_TENSORS + MLP_TENSORS + MOE_TENSORS, prefixes=("model.", ""))

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """The mixer's sizes from `linear_attn_config` where the checkpoint keeps them, and
        per layer its mixer (MLA on `full_attention`) and its FFN (dense SwiGLU on `dense`)."""
        n = spec["n_layers"]
        linear = config.get("linear_attn_config") or {}
        for hf, ours in (("num_heads", "n_heads"), ("head_dim", "head_dim")):
            if hf in linear:
                spec["attention"][ours] = int(linear[hf])
        if "short_conv_kernel_size" in linear:
            spec["attention"]["conv_kernel"] = int(linear["short_conv_kernel_size"])
        kinds = layer_types(config, n, KINDS, default_kinds)
        heads = config["num_attention_heads"]
        if (config.get("num_key_value_heads") or heads) != heads:
            raise ConversionError(
                f"config.json num_key_value_heads={config['num_key_value_heads']} is not "
                f"num_attention_heads={heads}: Kimi Linear's MLA expands every head's key"
            )
        mla = {
            "kind": "mla",
            "bias": bool(config.get("attention_bias", False)),
            "kv_lora_rank": config.get("kv_lora_rank", 512),
            "q_lora_rank": config.get("q_lora_rank"),
            "qk_nope_head_dim": config.get("qk_nope_head_dim", 128),
            "v_head_dim": config.get("v_head_dim", 128),
            "latent_norm_eps": 1e-6,  # KimiLinearRMSNorm's default, not rms_norm_eps
        }
        mlp_kinds = config.get("mlp_layer_types")
        if mlp_kinds is None:
            first = int(config.get("first_k_dense_replace", 1))
            mlp_kinds = ["dense" if i < first else "sparse" for i in range(n)]
        if len(mlp_kinds) != n or set(mlp_kinds) - {"dense", "sparse"}:
            raise ConversionError(
                f"config.json mlp_layer_types={mlp_kinds!r}: expected {n} of 'dense' / 'sparse'"
            )
        attends = {i for i, kind in enumerate(kinds) if kind == KINDS[1]}
        dense = {i for i, kind in enumerate(mlp_kinds) if kind == "dense"}
        glu = {"kind": "glu", "activation": "swiglu", "bias": False}
        layer_overrides(spec, mla, attends, glu, dense)

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """The inverse of `adjust`: `layer_types`, `mlp_layer_types` and the MLA sizes."""
        layers = layer_components(stack_config(dict(spec), "decoder"))
        config["layer_types"] = [
            KINDS[0] if c["attention"]["kind"] == "kimi_delta" else KINDS[1] for c in layers
        ]
        config["mlp_layer_types"] = [
            "sparse" if c["ffn"]["kind"] == "moe" else "dense" for c in layers
        ]
        config["num_key_value_heads"] = spec["n_heads"]
        mixer = spec["attention"]
        config["linear_num_heads"] = mixer.get("n_heads") or spec["n_heads"]
        config["linear_head_dim"] = mixer.get("head_dim") or spec["head_dim"]
        mla = next((c["attention"] for c in layers if c["attention"]["kind"] == "mla"), None)
        if mla is not None:
            config["attention_bias"] = bool(mla["bias"])
            config["kv_lora_rank"] = mla["kv_lora_rank"]
            config["q_lora_rank"] = mla["q_lora_rank"]
            config["qk_nope_head_dim"] = mla["qk_nope_head_dim"]
            config["v_head_dim"] = mla["v_head_dim"]

    def import_state(
        self, src: TensorSource, config: dict[str, Any], names: ZooNames, ctx: dict[str, Any]
    ) -> dict[str, Any]:
        """The original names under transformers' (`block_sparse_moe` -> `mlp`, the decay's
        tensors under `forget_gate`, the q/k/v convolutions as one), A_log as (H,)."""
        for name in list(src.names()):
            if ".block_sparse_moe." in name:
                src.add(name.replace(".block_sparse_moe.", ".mlp."), src.take(name))
        for name in list(src.names()):
            lead, _, part = name.rpartition("self_attn.")
            if lead and part in GATE_PARTS:
                src.add(f"{lead}self_attn.forget_gate.{part}", src.take(name))
            if lead and part == "q_conv1d.weight":
                convs = [src.take(f"{lead}self_attn.{p}_conv1d.weight") for p in "qkv"]
                src.add(f"{lead}self_attn.conv1d.weight", torch.cat(convs))
        for name in list(src.names()):
            if name.endswith("forget_gate.A_log"):
                src.add(name, src.take(name).reshape(-1))  # (1, 1, H, 1) -> (H,)
        return super().import_state(src, config, names, ctx)

    def export_state(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """transformers' own names, the experts stacked (no per-expert split), A_log as
        transformers shapes it."""
        state = Converter.export_state(self, *args, **kwargs)
        for name, t in state.items():
            if name.endswith("forget_gate.A_log"):
                state[name] = t.reshape(1, 1, -1, 1)
        return state
