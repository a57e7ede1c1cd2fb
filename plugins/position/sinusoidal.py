"""Sinusoidal positions (Vaswani et al., 2017): PE(p, 2i) = sin(p / base^(2i/d)), PE(p, 2i+1) = cos."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from archzoo.parts.component import param
from archzoo.parts.interfaces import Position

from .counting import PAD_POSITION, CountedPositions, count_param

FREQUENCIES = ("vaswani", "tensor2tensor")
LAYOUTS = ("interleaved", "halves")


def sinusoidal_table(
    positions: Tensor,
    dim: int,
    base: float = 10000.0,
    *,
    frequencies: str = "vaswani",
    layout: str = "interleaved",
) -> Tensor:
    """(...,) positions -> (..., dim) fp32. Frequency i of dim/2 is base^(-2i/dim) (vaswani)
    or base^(-i/(dim/2 - 1)) (tensor2tensor, fairseq's M2M-100); `interleaved` puts sin at
    even and cos at odd features, `halves` all sines first, then all cosines (Marian)."""
    half = dim // 2
    i = torch.arange(half, device=positions.device, dtype=torch.float32)  # (dim/2,)
    step = i * 2 / dim if frequencies == "vaswani" else i / max(half - 1, 1)
    angles = positions.to(torch.float32)[..., None] * base**-step  # (..., dim/2)
    if layout == "halves":
        return torch.cat((angles.sin(), angles.cos()), dim=-1)  # (..., dim)
    return torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2)  # (..., dim)


class SinusoidalPosition(CountedPositions, Position, name="sinusoidal", embed=True):
    """fixed sine/cosine vectors added to the token embeddings (no trained weights)"""

    class Config:
        base: float = param(10000.0, "wavelength base of the geometric progression", gt=1.0)
        frequencies: str = param(
            "vaswani",
            "base^(-2i/d) (vaswani) or base^(-i/(d/2-1)) (tensor2tensor: M2M-100)",
            choices=FREQUENCIES,
        )
        layout: str = param(
            "interleaved",
            "sin/cos per frequency, or all sines then all cosines (Marian, CTRL)",
            choices=LAYOUTS,
        )
        offset: int = param(0, "added to every position id (M2M-100: padding_idx + 1)", min=0)
        count: str = count_param()  # pads (-1) get a zero vector, as fairseq's padding row

    @classmethod
    def check(cls, cfg: Any, dims: Any) -> list[tuple[str, str]]:
        problems = cls.count_problems(cfg, dims)
        if dims.d_model % 2:
            problems.append(("", f"sinusoidal positions need an even d_model, got {dims.d_model}"))
        return problems

    def embed(self, positions: Tensor) -> Tensor:
        cfg = self.cfg
        table = sinusoidal_table(
            positions + cfg.offset,
            self.dims.d_model,
            cfg.base,
            frequencies=cfg.frequencies,
            layout=cfg.layout,
        )
        if cfg.count == "index":
            return table
        return table.masked_fill((positions == PAD_POSITION)[..., None], 0.0)  # (B, T, D)
