"""ScaleNorm (Nguyen & Salazar, 2019): one learned gain over the L2-normalised vector."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from archzoo import param
from archzoo.parts.interfaces import Norm


class ScaleNorm(Norm):
    name = "scalenorm"
    summary = "ScaleNorm: g * x / max(||x||, eps), one learned gain g initialised to sqrt(d)"

    @dataclass
    class Config:
        eps: float = param(1e-5, "lower bound of the L2 norm", gt=0.0)

    def __init__(self, cfg: Any, dims: Any, dim: int | None = None) -> None:
        super().__init__(cfg, dims)
        d = dim or dims.d_model
        # Named `gain`, not `weight`: the builder resets norm weights to ones, other
        # parameters keep the value their constructor gave them.
        self.gain = nn.Parameter(torch.tensor(float(d) ** 0.5))

    def forward(self, x: Tensor) -> Tensor:
        h = x.float()
        h = h / h.norm(dim=-1, keepdim=True).clamp_min(self.cfg.eps)  # (..., d), unit length
        return (self.gain * h).to(x.dtype)
