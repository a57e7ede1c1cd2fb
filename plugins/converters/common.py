"""Helpers shared by the Hugging Face converters."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from archzoo.converter import ConversionError, TensorSource

ACTIVATIONS = {
    "gelu": "gelu",
    "gelu_new": "gelu_tanh",
    "gelu_fast": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "relu": "relu",
    "silu": "silu",
    "swish": "silu",
}


def activation(name: str, key: str = "hidden_act") -> str:
    """archzoo's name for an HF activation, or a ConversionError naming the key."""
    if name not in ACTIVATIONS:
        raise ConversionError(
            f"config.json {key}={name!r} is not supported; supported: {', '.join(ACTIVATIONS)}"
        )
    return ACTIVATIONS[name]


def refuse(config: dict[str, Any], key: str, allowed: Any) -> None:
    """Fail when a config key is set to a value archzoo does not reproduce."""
    value = config.get(key, allowed)
    if value != allowed:
        raise ConversionError(f"config.json {key}={value!r} is not supported (only {allowed!r})")


# HF rope_parameters / rope_scaling keys -> archzoo rotary parameters
_ROPE_KEYS = {
    "factor": "factor",
    "original_max_position_embeddings": "original_max_len",
    "low_freq_factor": "low_freq_factor",
    "high_freq_factor": "high_freq_factor",
    "beta_fast": "beta_fast",
    "beta_slow": "beta_slow",
    "mscale": "mscale",
    "mscale_all_dim": "mscale_all_dim",
    "truncate": "truncate",
    "attention_factor": "attention_factor",
    "short_factor": "short_factor",
    "long_factor": "long_factor",
}
_ROPE_TYPES = {"default": "none", "linear": "linear", "dynamic": "dynamic", "yarn": "yarn"}
_ROPE_TYPES.update({"llama3": "llama3", "longrope": "longrope", "su": "longrope"})


def rope_parameters(config: dict[str, Any]) -> dict[str, Any]:
    """Rotary settings (base, fraction, scaling) from transformers 4 keys or 5's `rope_parameters`."""
    params = {**(config.get("rope_scaling") or {}), **(config.get("rope_parameters") or {})}
    rope_type = params.get("rope_type", params.get("type", "default"))
    if rope_type not in _ROPE_TYPES:
        raise ConversionError(
            f"config.json rope type {rope_type!r} is not supported; supported: "
            + ", ".join(_ROPE_TYPES)
        )
    theta = params.get(
        "rope_theta", config.get("rope_theta", config.get("rotary_emb_base", 10000.0))
    )
    fraction = params.get(
        "partial_rotary_factor",
        config.get("partial_rotary_factor", config.get("rotary_pct", 1.0)),
    )
    out = {"base": float(theta), "fraction": float(fraction)}
    if rope_type == "default":
        return out
    out["scaling"] = _ROPE_TYPES[rope_type]
    for hf, ours in _ROPE_KEYS.items():
        value = params.get(hf, config.get(hf) if hf == "original_max_position_embeddings" else None)
        if value is not None:
            out[ours] = [float(v) for v in value] if isinstance(value, list) else value
    if out["scaling"] in ("linear", "dynamic", "llama3") and "factor" in out:
        out["factor"] = float(out["factor"])
    return out


def prefix(src: TensorSource, probe: str, *candidates: str) -> str:
    """The first candidate prefix under which `probe` exists (or the first candidate)."""
    for p in candidates:
        if src.has(p + probe):
            return p
    return candidates[0]


def linear(
    out: dict[str, Tensor | None], src: TensorSource, hf: str, ours: str, *, bias: bool = True
) -> None:
    """Copy an nn.Linear's weight (and bias)."""
    out[f"{ours}.weight"] = src.take(f"{hf}.weight")
    if bias:
        out[f"{ours}.bias"] = src.take(f"{hf}.bias")


def norm(
    out: dict[str, Tensor | None], src: TensorSource, hf: str, ours: str, *, bias: bool = True
) -> None:
    linear(out, src, hf, ours, bias=bias)


def heads_qkv_to_blocks(t: Tensor | None, n_heads: int) -> Tensor | None:
    """Reorder a fused projection laid out per head [h: q|k|v] into [q | k | v] (BLOOM, NeoX)."""
    if t is None:
        return None
    rest = t.shape[1:]
    t = t.reshape(n_heads, 3, t.shape[0] // (3 * n_heads), *rest)  # (H, 3, hd, ...)
    return t.transpose(0, 1).reshape(-1, *rest)  # (3 * H * hd, ...)


def name_of(config: dict[str, Any]) -> str:
    path = str(config.get("_name_or_path") or "").rstrip("/").split("/")[-1]
    return path or f"{config['model_type']}-import"


def special_tokens(config: dict[str, Any]) -> dict[str, Any]:
    """Special token ids that generation defaults to, copied from config.json."""
    keys = ("bos_token_id", "eos_token_id", "decoder_start_token_id", "forced_eos_token_id")
    return {k: config[k] for k in keys if config.get(k) is not None}


def fuse(parts: list[Tensor | None]) -> Tensor | None:
    """Concatenate q, k, v projections (weights or biases) into one; None if any is missing."""
    return None if any(t is None for t in parts) else torch.cat(parts, dim=0)
