"""MiniMax-01 (MiniMax, 2025): lightning attention on the `linear_attention` layers, GQA
softmax attention with rotary on the `full_attention` ones, a mixture of SwiGLU experts
(softmax, top k, renormalised: Mixtral's) in every layer; each sublayer's residual carries
its normalised input, scaled by alpha, plus beta times the sublayer (`normed_residual`).

The lightning layers' decay falls with depth (1 - l/(L-1) + 1e-5 at layer l), so each is
written with its own `slope_scale`; transformers keeps the decays as buffers, which import
checks against the spec and export writes as transformers computes them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from archzoo.parts.converter import (
    ConversionError,
    Converter,
    Field,
    TensorSource,
    parse_fields,
    spec_parts,
)
from archzoo.parts.hf_tensors import ZooNames
from archzoo.specs.plan import layer_components, stack_config

from .common import PAD, SIZES, decoder_tasks, layer_types, lm_task, table
from .experts import PerExpert
from .llama import ATTENTION_TENSORS, ROTARY_BUFFER
from .mixtral import MOE_TENSORS, ExpertsConverter, aux_loss_coef, aux_loss_config
from .rope import rope_config, rope_parameters

LIGHTNING_TENSORS = """
        layers.{i}.self_attn.(qkv_proj,output_gate,norm,out_proj)   MIXER_IN,OUT_GATE,MIXER_NORM,MIXER_OUT
"""
DECAY_BUFFERS = ("slope_rate", "query_decay", "key_decay", "diagonal_decay")
KINDS = ("linear_attention", "full_attention")


def slope_scale(i: int, n: int) -> float:
    """MiniMax's decay factor of layer i of n, as transformers computes it."""
    return 1 - i / (n - 1 + 1e-5) + 1e-5


def default_kinds(config: Mapping[str, Any], n: int) -> list[str]:
    """Without `layer_types`: the original `attn_type_list` (0: lightning, 1: softmax), else
    transformers' default (softmax on even layers)."""
    if config.get("attn_type_list") is not None:
        return [KINDS[int(t)] for t in config["attn_type_list"]]
    return [KINDS[(i + 1) % 2] for i in range(n)]


class MiniMaxConverter(
    ExpertsConverter, Converter, model_type="minimax", hf_prefix="MiniMax", family="decoder"
):
    requires = {"hidden_act": "silu"}
    per_expert = PerExpert.under("block_sparse_moe.experts.{e}", "w1", "w3", "w2")
    fixed = spec_parts(
        "dropout: 0.0, embedding: token, block: normed_residual, norm: rmsnorm",
        "attention: {kind: lightning}",
        "ffn: {kind: moe, expert: glu, activation: swiglu, router: softmax_topk, "
        "normalize: true, fp32_weights: true}",
    )
    fields = (
        *SIZES,
        *parse_fields(
            """
            max_position_embeddings     max_len                     131072
            attention_dropout           attention_dropout           0.0
            rms_norm_eps                norm.eps                    1e-5
            block_size                  attention.block_size        256
            num_local_experts           ffn.n_experts               8
            num_experts_per_tok         ffn.top_k                   2
            router_jitter_noise         ffn.jitter                  0.0
            linear_attn_alpha_factor    block.attention_skip_scale  1.0
            linear_attn_beta_factor     block.attention_scale       1.0
            mlp_alpha_factor            block.ffn_skip_scale        1.0
            mlp_beta_factor             block.ffn_scale             1.0
            """
        ),
        Field("head_dim", "head_dim", lambda c: c["hidden_size"] // c["num_attention_heads"]),
        *PAD,
    )
    tasks = decoder_tasks("ForCausalLM", lm_task(False), token="score")
    tensors = table(
        ATTENTION_TENSORS + LIGHTNING_TENSORS + MOE_TENSORS,
        prefixes=("model.", ""),
        ignore=ROTARY_BUFFER,
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Rotary, the router loss, and per layer its mixer (a lightning layer with its own
        decay, or GQA attention) and its block's scales."""
        n = spec["n_layers"]
        kinds = layer_types(config, n, KINDS, default_kinds)
        params = rope_parameters(config)
        spec["position"] = {"kind": "rotary", **params, "fraction": 1.0}  # the whole head
        aux_loss_coef(spec, config)
        lightning = spec["attention"]
        lightning["slope_scale"] = slope_scale(0, n)
        window = config.get("sliding_window")
        attention: dict[str, Any] = {
            "kind": "mha" if window is None else "local",
            "fused_qkv": False,
            "bias": False,
            "out_bias": False,
            "n_kv_heads": config.get("num_key_value_heads") or config["num_attention_heads"],
        }
        if window is not None:
            attention["window"] = int(window)
        block = {
            **spec["block"],
            "attention_skip_scale": float(config.get("full_attn_alpha_factor", 1.0)),
            "attention_scale": float(config.get("full_attn_beta_factor", 1.0)),
        }
        full = [i for i, kind in enumerate(kinds) if kind == "full_attention"]
        layers: list[dict[str, Any]] = []
        if full:
            layers.append({"select": full, "attention": attention, "block": block})
        for i, kind in enumerate(kinds):
            if kind == "linear_attention" and i > 0:
                layers.append(
                    {"select": [i], "attention": {**lightning, "slope_scale": slope_scale(i, n)}}
                )
        if layers:
            spec["layers"] = layers

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """The inverse of `adjust`: `layer_types`, the softmax layers' attention and scales,
        rotary and the router loss (a lightning decay off MiniMax's depth rule is refused)."""
        layers = layer_components(stack_config(dict(spec), "decoder"))
        n = len(layers)
        config["layer_types"] = [
            KINDS[0] if c["attention"]["kind"] == "lightning" else KINDS[1] for c in layers
        ]
        for i, c in enumerate(layers):
            mixer = c["attention"]
            if (
                mixer["kind"] == "lightning"
                and abs(mixer["slope_scale"] - slope_scale(i, n)) > 1e-12
            ):
                raise ConversionError(
                    f"layer {i}: lightning slope_scale {mixer['slope_scale']} is not MiniMax's "
                    f"1 - {i}/({n}-1) + 1e-5 = {slope_scale(i, n)}, which MiniMaxConfig cannot change"
                )
        softmax = next((c for c in layers if c["attention"]["kind"] != "lightning"), None)
        if softmax is not None:
            att = softmax["attention"]
            config["num_key_value_heads"] = att.get("n_kv_heads") or spec["n_heads"]
            config["sliding_window"] = att["window"] if att["kind"] == "local" else None
            config["full_attn_alpha_factor"] = softmax["block"].get("attention_skip_scale", 1.0)
            config["full_attn_beta_factor"] = softmax["block"].get("attention_scale", 1.0)
        config.update(rope_config(spec["position"]))
        aux_loss_config(config, spec)

    def import_state(
        self, src: TensorSource, config: dict[str, Any], names: ZooNames, ctx: dict[str, Any]
    ) -> dict[str, Any]:
        """Check each lightning layer's saved decay rates against the spec's, then drop the
        decay buffers (the mixer computes them)."""
        layers = layer_components(stack_config(dict(ctx), "decoder"))
        H = ctx["n_heads"]
        for name in list(src.names()):
            buffer = name.rsplit(".", 1)[-1]
            if ".self_attn." not in name or buffer not in DECAY_BUFFERS:
                continue
            saved = src.take(name)
            i = int(name.split("layers.")[1].split(".")[0])
            mixer = layers[i]["attention"]
            if buffer != "slope_rate" or mixer["kind"] != "lightning":
                continue
            want = (1 / (2 ** (8 / H))) ** torch.arange(1, H + 1) * mixer["slope_scale"]
            if not torch.allclose(saved.float().flatten(), want, rtol=1e-5, atol=0.0):
                raise ConversionError(
                    f"{name}: the saved decay rates {saved.flatten().tolist()} are not MiniMax's "
                    f"for layer {i} of {len(layers)} ({want.tolist()})"
                )
        return super().import_state(src, config, names, ctx)

    def export_state(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """The table's tensors plus each lightning layer's decay buffers, as transformers
        computes them (its checkpoints carry them)."""
        state = super().export_state(*args, **kwargs)
        spec = args[2] if len(args) > 2 else kwargs["ctx"]
        layers = layer_components(stack_config(dict(spec), "decoder"))
        H, suffix = spec["n_heads"], "self_attn.qkv_proj.weight"
        for name in [n for n in state if n.endswith(suffix)]:
            lead = name[: -len(suffix)] + "self_attn."
            i = int(lead.split("layers.")[1].split(".")[0])
            mixer = layers[i]["attention"]
            for buffer, t in decay_buffers(H, mixer["block_size"], mixer["slope_scale"]).items():
                state[lead + buffer] = t
        return state


def decay_buffers(heads: int, block: int, scale: float) -> dict[str, torch.Tensor]:
    """MiniMaxLightningAttention's slope_rate (H, 1, 1), query_decay and key_decay (H, C, 1)
    and diagonal_decay (1, H, C, C) for `heads`, blocks of `block` tokens and `scale`."""
    rate = ((1 / (2 ** (8 / heads))) ** torch.arange(1, heads + 1) * scale)[:, None, None]
    steps = torch.arange(block) + 1  # 1..C
    gaps = (steps[:, None] - steps[None, :])[None, None] * rate  # (1, H, C, C)
    return {
        "slope_rate": rate,
        "query_decay": torch.exp(-rate * steps[:, None]),
        "key_decay": torch.exp(-rate * (block - steps[:, None])),
        "diagonal_decay": torch.exp(torch.where(gaps >= 0, -gaps, float("-inf"))),
    }
