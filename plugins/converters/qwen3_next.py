"""Qwen3-Next (Qwen team, 2025): Gated DeltaNet on the `linear_attention` layers and gated
attention (GQA, a sigmoid output gate from the query projection, per-head QK norms, rotary
on a quarter of each head) on the `full_attention` ones; RMSNorms that scale by 1 + w; a
mixture of SwiGLU experts (softmax, top k, renormalised) plus a sigmoid-gated shared expert
on every layer but `mlp_only_layers` (dense SwiGLU).

transformers fuses Gated DeltaNet's q, k, v and z into `in_proj_qkvz` and b, a into
`in_proj_ba`, grouped per key head ([q | k | v | z] of each); import regroups them into
archzoo's per-kind projections (Qwen3.5's names), export groups them back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from archzoo.parts.converter import Field, TensorSource, parse_fields, spec_parts
from archzoo.parts.hf_tensors import ZooNames
from archzoo.specs.plan import layer_components, stack_config

from .common import LM_HEAD, PAD, SIZES, layer_overrides, layer_types, table
from .experts import GATE_UP_DOWN_PROJ
from .llama import ATTENTION_TENSORS, MLP_TENSORS, LlamaConverter
from .mixtral import MOE_TENSORS, ExpertsConverter
from .qwen import QK_NORM_TENSORS
from .rope import rope_parameters

NEXT_TENSORS = """
        layers.{i}.mlp.shared_expert.(gate_proj,up_proj)        SHARED_UP   fuse
        layers.{i}.mlp.shared_expert.down_proj                  SHARED_DOWN
        layers.{i}.mlp.shared_expert_gate                       SHARED_GATE
        layers.{i}.linear_attn.(in_proj_qkv,in_proj_z)          GDN_QKV,GDN_Z
        layers.{i}.linear_attn.(in_proj_b,in_proj_a)            GDN_B,GDN_A
        layers.{i}.linear_attn.(conv1d,norm,out_proj)           MIXER_CONV,MIXER_NORM,MIXER_OUT
        layers.{i}.linear_attn.A_log                            A_LOG       tensor
        layers.{i}.linear_attn.dt_bias                          DT_BIAS     tensor
"""
# config keys of the Gated DeltaNet layers every Qwen3-Next and Qwen3.5 type shares
MIXER_FIELDS = parse_fields(
    """
    max_position_embeddings     max_len                         32768
    attention_dropout           attention_dropout               0.0
    rms_norm_eps                norm.eps,attention.norm_eps     1e-6
    linear_conv_kernel_dim      attention.conv_kernel           4
    linear_key_head_dim         attention.head_k_dim            128
    linear_value_head_dim       attention.head_v_dim            128
    linear_num_key_heads        attention.n_k_heads             16
    linear_num_value_heads      attention.n_v_heads             32
    """
)
LAYER_TYPES = ("linear_attention", "full_attention")
FUSED_QKVZ, FUSED_BA = "linear_attn.in_proj_qkvz.weight", "linear_attn.in_proj_ba.weight"


class Qwen3NextConverter(
    ExpertsConverter, LlamaConverter, model_type="qwen3_next", hf_prefix="Qwen3Next"
):
    requires = {"hidden_act": "silu"}
    per_expert = GATE_UP_DOWN_PROJ
    fixed = spec_parts(
        "dropout: 0.0, embedding: token, block: pre_ln, norm: {kind: rmsnorm, offset: 1.0}",
        "attention: {kind: gated_deltanet}",
        "ffn: {kind: moe, expert: glu, activation: swiglu, router: softmax_topk, n_shared: 1, "
        "shared_gate: true}",
    )
    fields = (
        *SIZES,
        *MIXER_FIELDS,
        *parse_fields(
            """
            num_experts                 ffn.n_experts                   512
            num_experts_per_tok         ffn.top_k                       10
            moe_intermediate_size       ffn.d_expert                    512
            shared_expert_intermediate_size     ffn.d_shared            512
            norm_topk_prob              ffn.normalize                   True
            """
        ),
        Field("head_dim", "head_dim", 256),
        *PAD,
    )
    tensors = table(
        ATTENTION_TENSORS + QK_NORM_TENSORS + MLP_TENSORS + MOE_TENSORS + NEXT_TENSORS,
        LM_HEAD,
        prefixes=("model.", ""),
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Rotary on a quarter of each head, the router loss, and per layer its mixer and FFN."""
        spec["position"] = {"kind": "rotary", **rope_parameters(config, default_fraction=0.25)}
        n = spec["n_layers"]
        coef = float(config.get("router_aux_loss_coef") or 0.0)
        spec["ffn"]["aux_loss_coef"] = coef if config.get("output_router_logits") else 0.0
        attends, attention = attention_layers(config, n)
        step = int(config.get("decoder_sparse_step") or 1)
        dense_only = set(config.get("mlp_only_layers") or ())
        dense = {i for i in range(n) if i in dense_only or (i + 1) % step != 0}
        glu = {"kind": "glu", "activation": "swiglu", "bias": False}
        layer_overrides(spec, attention, attends, glu, dense)

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """The inverse of `adjust`: rotary, `layer_types`, `mlp_only_layers`, the router loss."""
        super().adjust_config(config, spec)
        layers = write_layer_types(config, spec)
        config["decoder_sparse_step"] = 1
        config["mlp_only_layers"] = [i for i, c in enumerate(layers) if c["ffn"]["kind"] != "moe"]
        coef = float(spec["ffn"].get("aux_loss_coef") or 0.0)
        config["output_router_logits"] = coef > 0
        if coef > 0:
            config["router_aux_loss_coef"] = coef

    def import_state(
        self, src: TensorSource, config: dict[str, Any], names: ZooNames, ctx: dict[str, Any]
    ) -> dict[str, Any]:
        """Split each layer's grouped in_proj_qkvz / in_proj_ba into per-kind projections."""
        for name in list(src.names()):
            if name.endswith(FUSED_QKVZ):
                lead = name[: -len(FUSED_QKVZ)] + "linear_attn."
                qkv, z = ungroup(src.take(name), _sizes(config), (0, 1, 2), (3,))
                src.add(lead + "in_proj_qkv.weight", qkv)
                src.add(lead + "in_proj_z.weight", z)
                ba = src.take(lead + "in_proj_ba.weight")
                b, a = ungroup(ba, _ba_sizes(config), (0,), (1,))
                src.add(lead + "in_proj_b.weight", b)
                src.add(lead + "in_proj_a.weight", a)
        return super().import_state(src, config, names, ctx)

    def export_state(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """Group the per-kind projections back into in_proj_qkvz / in_proj_ba."""
        state = super().export_state(*args, **kwargs)
        spec = args[2] if len(args) > 2 else kwargs["ctx"]
        config = _mixer_sizes(spec)
        out: dict[str, Tensor] = {}
        for name, t in state.items():
            if name.endswith("linear_attn.in_proj_qkv.weight"):
                lead = name[: -len("in_proj_qkv.weight")]
                z = state[lead + "in_proj_z.weight"]
                out[lead + "in_proj_qkvz.weight"] = group([t, z], _sizes(config), (3, 1))
                b, a = state[lead + "in_proj_b.weight"], state[lead + "in_proj_a.weight"]
                out[lead + "in_proj_ba.weight"] = group([b, a], _ba_sizes(config), (1, 1))
            elif not any(name.endswith(f"in_proj_{p}.weight") for p in ("z", "b", "a")):
                out[name] = t
        return out


def attention_layers(config: Mapping[str, Any], n: int) -> tuple[set[int], dict[str, Any]]:
    """The `full_attention` layers of `layer_types` and their gated attention's options."""
    kinds = layer_types(config, n, LAYER_TYPES)
    attention = {
        "kind": "gated_mha",
        "bias": bool(config.get("attention_bias", False)),
        "n_kv_heads": config.get("num_key_value_heads") or config["num_attention_heads"],
    }
    return {i for i, kind in enumerate(kinds) if kind == "full_attention"}, attention


def write_layer_types(config: dict[str, Any], spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The inverse of `attention_layers` into config.json; the spec's per-layer components."""
    layers = layer_components(stack_config(dict(spec), "decoder"))
    config["layer_types"] = [
        "full_attention" if c["attention"]["kind"] == "gated_mha" else "linear_attention"
        for c in layers
    ]
    att = next((c["attention"] for c in layers if c["attention"]["kind"] == "gated_mha"), None)
    config["num_key_value_heads"] = att["n_kv_heads"] if att else spec["n_heads"]
    config["attention_bias"] = bool(att["bias"]) if att else False
    return layers


def _mixer_sizes(spec: Mapping[str, Any]) -> dict[str, int]:
    """The Gated DeltaNet sizes of a spec, under config.json's names (nulls resolved)."""
    mixer = spec["attention"]
    hk = mixer["n_k_heads"] or spec["n_heads"]
    dk = mixer["head_k_dim"] or spec["head_dim"]
    return {
        "linear_num_key_heads": hk,
        "linear_num_value_heads": mixer["n_v_heads"] or hk,
        "linear_key_head_dim": dk,
        "linear_value_head_dim": mixer["head_v_dim"] or dk,
    }


def _sizes(config: Mapping[str, Any]) -> tuple[int, list[int]]:
    """Key heads and the rows of q, k, v, z in one key head's group of in_proj_qkvz."""
    hk, hv = config["linear_num_key_heads"], config["linear_num_value_heads"]
    dk, dv = config["linear_key_head_dim"], config["linear_value_head_dim"]
    r = hv // hk
    return hk, [dk, dk, r * dv, r * dv]


def _ba_sizes(config: Mapping[str, Any]) -> tuple[int, list[int]]:
    """Key heads and the rows of b, a in one key head's group of in_proj_ba."""
    hk, hv = config["linear_num_key_heads"], config["linear_num_value_heads"]
    return hk, [hv // hk, hv // hk]


def ungroup(w: Tensor, sizes: tuple[int, list[int]], *outputs: tuple[int, ...]) -> list[Tensor]:
    """Rows grouped per key head ([part 0 | part 1 | ...] of each group) regrouped per part:
    each of `outputs` is the parts whose rows (every group's, in group order) it stacks."""
    groups, widths = sizes
    parts = w.view(groups, sum(widths), -1).split(widths, dim=1)  # each (G, width, D)
    return [torch.cat([parts[p].reshape(-1, w.shape[-1]) for p in out]) for out in outputs]


def group(tensors: list[Tensor], sizes: tuple[int, list[int]], counts: tuple[int, ...]) -> Tensor:
    """The inverse of `ungroup`: `tensors` holding counts[j] parts each, into grouped rows."""
    groups, widths = sizes
    parts: list[Tensor] = []
    i = 0
    for t, count in zip(tensors, counts, strict=True):
        own = widths[i : i + count]
        rows = [groups * w for w in own]
        for piece, w in zip(t.split(rows), own, strict=True):
            parts.append(piece.view(groups, w, -1))  # (G, width, D)
        i += count
    return torch.cat(parts, dim=1).reshape(-1, tensors[0].shape[-1])
