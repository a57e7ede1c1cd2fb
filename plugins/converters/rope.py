"""Rotary settings of an HF config: base, rotated fraction and RoPE scaling."""

from __future__ import annotations

from typing import Any

from archzoo.parts.converter import ConversionError

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


def rope_parameters(config: dict[str, Any], default_fraction: float = 1.0) -> dict[str, Any]:
    """Rotary settings (base, fraction, scaling) from transformers 4 keys or 5's
    `rope_parameters`; `default_fraction` rotates where the config names no share."""
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
        config.get("partial_rotary_factor", config.get("rotary_pct")),
    )
    fraction = default_fraction if fraction is None else fraction
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


# the archzoo rotary parameters each HF rope type reads (export writes these only)
_TYPE_KEYS = {
    "linear": ("factor",),
    "dynamic": ("factor", "original_max_len"),
    "yarn": (
        "factor",
        "original_max_len",
        "beta_fast",
        "beta_slow",
        "mscale",
        "mscale_all_dim",
        "truncate",
        "attention_factor",
    ),
    "llama3": ("factor", "original_max_len", "low_freq_factor", "high_freq_factor"),
    "longrope": ("factor", "original_max_len", "short_factor", "long_factor", "attention_factor"),
}


def rope_config(position: dict[str, Any]) -> dict[str, Any]:
    """The inverse of `rope_parameters`: transformers-5 `rope_parameters` for a rotary spec
    position (nothing for another position: export's round trip then names it)."""
    if position.get("kind") != "rotary":
        return {}
    scaling = position.get("scaling", "none")
    rope_type = next((hf for hf, ours in _ROPE_TYPES.items() if ours == scaling), None)
    if rope_type is None:
        return {}
    params: dict[str, Any] = {
        "rope_type": rope_type,
        "rope_theta": position["base"],
        "partial_rotary_factor": position["fraction"],
    }
    ours_to_hf = {ours: hf for hf, ours in _ROPE_KEYS.items()}
    for key in _TYPE_KEYS.get(rope_type, ()):
        if position.get(key) is not None:
            params[ours_to_hf[key]] = position[key]
    return {"rope_parameters": params}
