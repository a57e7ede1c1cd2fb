"""Sinusoidal positions (Vaswani et al., 2017): PE(p, 2i) = sin(p / base^(2i/d)), PE(p, 2i+1) = cos."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from archzoo.component import Capabilities, param
from archzoo.interfaces import Position


def sinusoidal_table(positions: Tensor, dim: int, base: float = 10000.0) -> Tensor:
    """(...,) positions -> (..., dim) with sin at even and cos at odd features (fp32)."""
    i = torch.arange(0, dim, 2, device=positions.device, dtype=torch.float32)  # (dim/2,)
    inv_freq = base ** (-i / dim)
    angles = positions.to(torch.float32)[..., None] * inv_freq  # (..., dim/2)
    return torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2)  # (..., dim)


class SinusoidalPosition(Position):
    name = "sinusoidal"
    summary = "fixed sine/cosine vectors added to the token embeddings (no trained weights)"
    capabilities = Capabilities(embed=True)

    @dataclass
    class Config:
        base: float = param(10000.0, "wavelength base of the geometric progression", gt=1.0)

    @classmethod
    def check(cls, cfg: Any, dims: Any) -> list[tuple[str, str]]:
        if dims.d_model % 2:
            return [("", f"sinusoidal positions need an even d_model, got {dims.d_model}")]
        return []

    def embed(self, positions: Tensor) -> Tensor:
        return sinusoidal_table(positions, self.dims.d_model, self.cfg.base)
