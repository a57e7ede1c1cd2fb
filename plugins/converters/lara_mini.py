"""Lara Mini (Translated, 2026): Qwen3.5-MoE's Gated DeltaNet on `linear_attention` layers,
Qwen3's attention (per-head QK norm) windowed with rotary on `sliding_attention` ones and NoPE
on `full_attention` ones; plain RMSNorms; experts plus an ungated shared expert everywhere. Its
checkpoints fuse Gated DeltaNet's projections into `in_proj` ([qkv | z | b | a]), norm `out_norm`."""

from __future__ import annotations

from typing import Any

import torch

from archzoo.parts.converter import spec_parts
from archzoo.specs.plan import layer_components, stack_config

from .common import HEADLESS, layer_types, lm_task, with_defaults
from .llama import LlamaConverter
from .mixtral import aux_loss_coef, aux_loss_config
from .qwen3_5_moe import Qwen3_5MoeTextConverter
from .rope import rope_parameters

KINDS = dict(gated_deltanet="linear_attention", local="sliding_attention", mha="full_attention")
PARTS = ("in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a")


class LaraMiniConverter(Qwen3_5MoeTextConverter, model_type="lara_mini", hf_prefix="LaraMini"):
    fixed = spec_parts(
        "dropout: 0.0, embedding: token, block: pre_ln, norm: {kind: rmsnorm, scale_fp32: true}",
        "attention: {kind: gated_deltanet}",
        "ffn: {kind: moe, expert: glu, activation: swiglu, router: softmax_topk, n_shared: 1}",
    )
    fields = with_defaults(
        Qwen3_5MoeTextConverter.fields, num_experts=128, num_experts_per_tok=4, head_dim=128
    )
    tasks = {"ForCausalLM": lm_task(True), "Model": HEADLESS}

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Rotary, the router, and per layer its mixer: Gated DeltaNet, windowed or NoPE."""
        spec["position"] = {"kind": "rotary", **rope_parameters(config)}
        aux_loss_coef(spec, config)
        spec["ffn"]["normalize"] = bool(config.get("norm_topk_prob", True))
        kinds = layer_types(config, spec["n_layers"], tuple(KINDS.values()))
        bias = bool(config.get("attention_bias", False))
        n_kv = config.get("num_key_value_heads") or config["num_attention_heads"]
        att = dict(kind="mha", fused_qkv=False, qk_norm="head", bias=bias, n_kv_heads=n_kv)
        window = {**att, "kind": "local", "window": int(config.get("sliding_window") or 512)}
        nope = {**att, "use_position": False}
        picked = [
            ([i for i, k in enumerate(kinds) if k == KINDS[a["kind"]]], a) for a in (window, nope)
        ]
        spec["layers"] = [{"select": s, "attention": a} for s, a in picked if s]

    def adjust_config(self, config: dict[str, Any], spec: Any) -> None:
        """The inverse of `adjust`: rotary, `layer_types`, the window, the router loss."""
        LlamaConverter.adjust_config(self, config, spec)
        aux_loss_config(config, spec)
        mixers = [c["attention"] for c in layer_components(stack_config(dict(spec), "decoder"))]
        config["layer_types"] = [KINDS[m["kind"]] for m in mixers]
        att = next((m for m in mixers if m["kind"] != "gated_deltanet"), {})
        config["num_key_value_heads"] = att.get("n_kv_heads") or spec["n_heads"]
        config["attention_bias"] = bool(att.get("bias", False))
        config["sliding_window"] = next((m["window"] for m in mixers if m["kind"] == "local"), 512)

    def import_state(self, src: Any, config: dict[str, Any], *rest: Any) -> dict[str, Any]:
        """Each fused `in_proj` split into Qwen3.5's four projections; `out_norm` as `norm`."""
        hk, hv = config["linear_num_key_heads"], config["linear_num_value_heads"]
        dk, dv = config["linear_key_head_dim"], config["linear_value_head_dim"]
        for name in list(src.names()):
            lead = name.rpartition("linear_attn.")[0] + "linear_attn."
            if name.endswith("linear_attn.in_proj.weight"):  # rows [qkv | z | b | a]
                parts = src.take(name).split([2 * hk * dk + hv * dv, hv * dv, hv, hv])
                for part, t in zip(PARTS, parts, strict=True):
                    src.add(f"{lead}{part}.weight", t)
            elif name.endswith("linear_attn.out_norm.weight"):
                src.add(lead + "norm.weight", src.take(name))
        return super().import_state(src, config, *rest)

    def export_state(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """The inverse of `import_state`; the experts stay stacked, as transformers saves them."""
        state = LlamaConverter.export_state(self, *args, **kwargs)
        out = {}
        for name, t in state.items():
            lead = name.rpartition("linear_attn.")[0] + "linear_attn."
            if name.endswith("linear_attn.in_proj_qkv.weight"):
                out[lead + "in_proj.weight"] = torch.cat(
                    [state[f"{lead}{p}.weight"] for p in PARTS]
                )
            elif name.endswith("linear_attn.norm.weight"):
                out[lead + "out_norm.weight"] = t
            elif not any(name.endswith(f"linear_attn.{p}.weight") for p in PARTS):
                out[name] = t
        return out
