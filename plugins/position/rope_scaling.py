"""RoPE scaling: how rotary inverse frequencies (and the cos/sin magnitude) stretch to longer contexts.

Each scheme maps the plain frequencies base^(-2i/d) to new ones, and some multiply cos/sin by an
attention factor. `dynamic` (NTK) and `longrope` depend on the sequence length seen by a forward
pass, so they take it as a tensor (no host sync, compile-friendly).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

SCALINGS = ("none", "linear", "dynamic", "yarn", "llama3", "longrope")


def plain_inv_freq(rot_dim: int, base: float | Tensor, device: Any = None) -> Tensor:
    """(rot_dim/2,) fp32 inverse frequencies base^(-2i/rot_dim), i = 0 .. rot_dim/2 - 1."""
    exponent = torch.arange(0, rot_dim, 2, device=device, dtype=torch.float32) / rot_dim
    return 1.0 / (base**exponent)


def linear_inv_freq(cfg: Any, rot_dim: int, device: Any = None) -> Tensor:
    """Position interpolation (Chen et al.): every position is divided by `factor`."""
    return plain_inv_freq(rot_dim, cfg.base, device) / cfg.factor


def llama3_inv_freq(cfg: Any, rot_dim: int, device: Any = None) -> Tensor:
    """Llama 3.1: long wavelengths divided by `factor`, short kept, a smooth ramp between."""
    inv_freq = plain_inv_freq(rot_dim, cfg.base, device)
    old_len = cfg.original_max_len
    wavelen = 2 * math.pi / inv_freq
    low_freq_wavelen = old_len / cfg.low_freq_factor  # longer than this: fully scaled
    high_freq_wavelen = old_len / cfg.high_freq_factor  # shorter than this: unchanged
    scaled = torch.where(wavelen > low_freq_wavelen, inv_freq / cfg.factor, inv_freq)
    smooth = (old_len / wavelen - cfg.low_freq_factor) / (
        cfg.high_freq_factor - cfg.low_freq_factor
    )
    smoothed = (1 - smooth) * scaled / cfg.factor + smooth * scaled
    medium = (wavelen >= high_freq_wavelen) & (wavelen <= low_freq_wavelen)
    return torch.where(medium, smoothed, scaled)


def _yarn_mscale(scale: float, mscale: float = 1.0) -> float:
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def stretch(cfg: Any, max_len: int) -> float:
    """The context stretch: `factor`, or max_len / original_max_len when it is left null."""
    if cfg.factor is not None:
        return cfg.factor
    return max_len / cfg.original_max_len


def yarn_inv_freq(cfg: Any, rot_dim: int, max_len: int, device: Any = None) -> Tensor:
    """YaRN (Peng et al.): interpolate low frequencies, extrapolate high ones, ramp between."""
    factor = stretch(cfg, max_len)
    base = cfg.base

    def correction_dim(rotations: float) -> float:  # the dimension that turns `rotations` times
        return (
            rot_dim
            * math.log(cfg.original_max_len / (rotations * 2 * math.pi))
            / (2 * math.log(base))
        )

    low, high = correction_dim(cfg.beta_fast), correction_dim(cfg.beta_slow)
    if cfg.truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, rot_dim - 1)
    if low == high:
        high += 0.001  # avoid a zero-width ramp
    ramp = (
        (torch.arange(rot_dim // 2, device=device, dtype=torch.float32) - low) / (high - low)
    ).clamp(0, 1)
    extrapolate = 1 - ramp  # 1: keep the plain frequency, 0: interpolate
    plain = plain_inv_freq(rot_dim, base, device)
    return plain / factor * (1 - extrapolate) + plain * extrapolate


def yarn_attention_factor(cfg: Any, max_len: int) -> float:
    """YaRN's cos/sin magnitude: given, or 0.1 ln(s) + 1 (DeepSeek's mscale ratio when set)."""
    if cfg.attention_factor is not None:
        return cfg.attention_factor
    factor = stretch(cfg, max_len)
    if cfg.mscale and cfg.mscale_all_dim:
        return _yarn_mscale(factor, cfg.mscale) / _yarn_mscale(factor, cfg.mscale_all_dim)
    return _yarn_mscale(factor)


def longrope_attention_factor(cfg: Any, max_len: int) -> float:
    """LongRoPE's cos/sin magnitude: given, or sqrt(1 + ln(s) / ln(original_max_len))."""
    if cfg.attention_factor is not None:
        return cfg.attention_factor
    factor = stretch(cfg, max_len)
    if factor <= 1.0:
        return 1.0
    return math.sqrt(1 + math.log(factor) / math.log(cfg.original_max_len))


def longrope_inv_freq(cfg: Any, rot_dim: int, seq_len: Tensor) -> Tensor:
    """LongRoPE (Phi-3): per-frequency rescaling, `long_factor` once a sequence passes
    original_max_len and `short_factor` before; seq_len is a 0-d tensor."""
    device = seq_len.device
    plain = plain_inv_freq(rot_dim, cfg.base, device)
    short = torch.tensor(cfg.short_factor, dtype=torch.float32, device=device)
    long = torch.tensor(cfg.long_factor, dtype=torch.float32, device=device)
    return torch.where(seq_len > cfg.original_max_len, plain / long, plain / short)


def dynamic_inv_freq(cfg: Any, rot_dim: int, max_len: int, seq_len: Tensor) -> Tensor:
    """Dynamic NTK: the base grows with the sequence once it passes max_len; seq_len is 0-d."""
    seq = seq_len.clamp(min=max_len).to(torch.float32)
    base = cfg.base * ((cfg.factor * seq / max_len) - (cfg.factor - 1)) ** (rot_dim / (rot_dim - 2))
    return plain_inv_freq(rot_dim, base, seq_len.device)


def scaled_inv_freq(
    cfg: Any, rot_dim: int, max_len: int, positions: Tensor
) -> tuple[Tensor, float]:
    """Inverse frequencies (rot_dim/2,) and the cos/sin factor for a forward over `positions`."""
    kind = cfg.scaling
    device = positions.device
    if kind == "none":
        return plain_inv_freq(rot_dim, cfg.base, device), 1.0
    if kind == "linear":
        return linear_inv_freq(cfg, rot_dim, device), 1.0
    if kind == "llama3":
        return llama3_inv_freq(cfg, rot_dim, device), 1.0
    if kind == "yarn":
        return yarn_inv_freq(cfg, rot_dim, max_len, device), yarn_attention_factor(cfg, max_len)
    seq_len = positions.max() + 1  # the longest sequence this forward covers, as HF counts it
    if kind == "dynamic":
        return dynamic_inv_freq(cfg, rot_dim, max_len, seq_len), 1.0
    return longrope_inv_freq(cfg, rot_dim, seq_len), longrope_attention_factor(cfg, max_len)


def check_scaling(cfg: Any, rot_dim: int) -> list[tuple[str, str]]:
    """What a scaling type needs from the config, as (parameter, problem) pairs."""
    kind = cfg.scaling
    problems = []
    if kind in ("linear", "dynamic", "llama3") and cfg.factor is None:
        problems.append(("factor", f"scaling {kind!r} needs a factor"))
    if kind in ("yarn", "llama3", "longrope") and cfg.original_max_len is None:
        problems.append(("original_max_len", f"scaling {kind!r} needs original_max_len"))
    if kind == "llama3" and cfg.high_freq_factor <= cfg.low_freq_factor:
        problems.append(("high_freq_factor", "must be greater than low_freq_factor"))
    if kind == "longrope":
        for key in ("short_factor", "long_factor"):
            got = getattr(cfg, key)
            if got is None or len(got) != rot_dim // 2:
                n = 0 if got is None else len(got)
                problems.append((key, f"needs {rot_dim // 2} values (rotary dim / 2), got {n}"))
    if kind == "dynamic" and rot_dim <= 2:
        problems.append(("scaling", "dynamic scaling needs a rotary dimension above 2"))
    return problems
