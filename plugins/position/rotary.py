"""Rotary positions (Su et al., RoFormer): rotate query/key feature pairs by position angles."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from archzoo.parts.component import param
from archzoo.parts.interfaces import Position

from .rope_scaling import SCALINGS, check_scaling, plain_inv_freq, scaled_inv_freq


def rotary_angles(
    positions: Tensor, rot_dim: int, base: float, inv_freq: Tensor | None = None
) -> Tensor:
    """(B, T) positions -> (B, T, rot_dim/2) angles p * base^(-2i/rot_dim) (or p * inv_freq), fp32."""
    if inv_freq is None:
        inv_freq = plain_inv_freq(rot_dim, base, positions.device)
    return positions.to(torch.float32)[..., None] * inv_freq


def apply_rotary(
    x: Tensor,
    cos: Tensor,
    sin: Tensor,
    interleaved: bool,
    fp32: bool = False,
    round_cos_sin: bool = False,
) -> Tensor:
    """Rotate the first rot_dim features of x (B, H, T, hd); cos/sin are (B, 1, T, rot_dim/2).

    The rotation runs in x's dtype with cos and sin rounded to it, one op at a time, as
    transformers rotates (in 16-bit floats every op rounds, so this order gives its bits).
    `fp32`: 16-bit inputs rotate in float32 and round once instead (closer to exact), by
    cos and sin rounded to x's dtype first when `round_cos_sin` (ModernBERT).
    """
    rot_dim = cos.shape[-1] * 2
    xr, rest = x[..., :rot_dim], x[..., rot_dim:]
    if fp32 and x.element_size() < 4:
        if round_cos_sin:
            cos, sin = cos.to(x.dtype), sin.to(x.dtype)
        xr = xr.float()
    cos, sin = cos.to(xr.dtype), sin.to(xr.dtype)
    if interleaved:  # pairs (0,1), (2,3), ... (GPT-J, RoFormer)
        x1, x2 = xr[..., 0::2], xr[..., 1::2]
        out = torch.stack((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).flatten(-2)
    else:  # pairs (i, i + rot_dim/2) (GPT-NeoX, Llama)
        x1, x2 = xr[..., : rot_dim // 2], xr[..., rot_dim // 2 :]
        out = torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)
    out = out.to(x.dtype)
    return out if rest.shape[-1] == 0 else torch.cat((out, rest), dim=-1)


class RotaryPosition(Position, name="rotary", rotate=True, even_head_dim=True):
    """rotate query and key feature pairs by position-dependent angles (RoPE)"""

    class Config:
        base: float = param(10000.0, "theta: wavelength base of the angles", gt=1.0)
        fraction: float = param(1.0, "share of the head dimension that rotates", gt=0.0, max=1.0)
        interleaved: bool = param(False, "rotate adjacent pairs (GPT-J) instead of halves (NeoX)")
        rotate_fp32: bool = param(
            False,
            "16-bit queries/keys rotate in float32, rounded once (false: in their dtype, op by op "
            "as transformers, whose bits that gives)",
        )
        round_cos_sin: bool = param(
            False,
            "with rotate_fp32: cos and sin rounded to the queries' dtype first (ModernBERT's "
            "rotary hands them over in that dtype; OLMo 2's in float32)",
        )
        scaling: str = param("none", "context extension of the frequencies", choices=SCALINGS)
        factor: float | None = param(
            None, "scaling: context stretch (null: max_len / original_max_len)", gt=0.0
        )
        original_max_len: int | None = param(
            None, "scaling: pre-training context (yarn, llama3, longrope)", min=1
        )
        low_freq_factor: float = param(1.0, "llama3: wavelengths above len/this are scaled", gt=0.0)
        high_freq_factor: float = param(4.0, "llama3: wavelengths below len/this are kept", gt=0.0)
        beta_fast: float = param(32.0, "yarn: rotations where extrapolation ends", gt=0.0)
        beta_slow: float = param(1.0, "yarn: rotations where interpolation starts", gt=0.0)
        mscale: float | None = param(None, "yarn: numerator of DeepSeek's mscale ratio")
        mscale_all_dim: float | None = param(None, "yarn: denominator of the mscale ratio")
        truncate: bool = param(True, "yarn: round the correction range to whole dimensions")
        attention_factor: float | None = param(
            None, "yarn/longrope: cos/sin magnitude (null: the scheme's formula)", gt=0.0
        )
        short_factor: list[float] | None = param(None, "longrope: per-frequency short factors")
        long_factor: list[float] | None = param(None, "longrope: per-frequency long factors")
        recache: bool = param(
            False, "longrope: recompute cached keys on passing original_max_len (HF's Phi-3)"
        )

    def __init__(self, cfg: Any, dims: Any, *, causal: bool = False) -> None:
        super().__init__(cfg, dims, causal=causal)
        self.rot_dim = self.rotary_dim(cfg, dims)

    @staticmethod
    def rotary_dim(cfg: Any, dims: Any) -> int:
        return int(dims.head_dim * cfg.fraction)

    @classmethod
    def check(cls, cfg: Any, dims: Any) -> list[tuple[str, str]]:
        rot = cls.rotary_dim(cfg, dims)
        if rot == 0 or (rot % 2 and rot != dims.head_dim):  # odd head_dim: the generic check
            return [
                ("fraction", f"rotary dimension {rot} (head_dim x fraction) must be even and > 0")
            ]
        return check_scaling(cfg, rot)

    def prepare(self, q_pos: Tensor, k_pos: Tensor) -> tuple[Tensor, Tensor]:
        if self.cfg.scaling == "none":
            angles = rotary_angles(q_pos, self.rot_dim, self.cfg.base)[:, None]  # (B, 1, Tq, r/2)
            return angles.cos(), angles.sin()
        # dynamic/longrope read the longest position of this forward, as transformers does
        inv_freq, factor = scaled_inv_freq(self.cfg, self.rot_dim, self.dims.max_len, q_pos)
        angles = rotary_angles(q_pos, self.rot_dim, self.cfg.base, inv_freq)[:, None]
        return angles.cos() * factor, angles.sin() * factor

    def stale_cache(self, cached: int, total: int) -> bool:
        """LongRoPE with `recache`: keys rotated with the short factors go stale when a sequence
        first passes original_max_len (transformers' Phi-3 recomputes them with the long ones)."""
        limit = self.cfg.original_max_len
        return self.cfg.scaling == "longrope" and self.cfg.recache and cached <= limit < total

    def rotate(self, state: Any, q: Tensor, k: Tensor) -> tuple[Tensor, Tensor]:
        cos, sin = state
        il, fp32, rounded = self.cfg.interleaved, self.cfg.rotate_fp32, self.cfg.round_cos_sin
        if not (fp32 and q.element_size() < 4):  # rounded to q's dtype once, for q and k
            cos, sin = cos.to(q.dtype), sin.to(q.dtype)
        return apply_rotary(q, cos, sin, il, fp32, rounded), apply_rotary(
            k, cos, sin, il, fp32, rounded
        )
