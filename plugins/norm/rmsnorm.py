"""RMSNorm (Zhang & Sennrich, 2019): scale by the root mean square, no centring."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from archzoo.component import param
from archzoo.interfaces import Norm


class RMSNorm(Norm):
    name = "rmsnorm"
    summary = "RMSNorm: divide by the root mean square (computed in fp32), then scale"

    @dataclass
    class Config:
        eps: float = param(1e-6, "added to the mean square", gt=0.0)
        offset: float = param(
            0.0, "scale by (offset + weight), in fp32; Gemma stores weight = scale - 1 (offset 1)"
        )

    def __init__(self, cfg: Any, dims: Any, dim: int | None = None) -> None:
        super().__init__(cfg, dims)
        self.weight = nn.Parameter(torch.ones(dim or dims.d_model))

    def init_weights(self, std: float) -> None:
        """A unit scale: weight 1 - offset."""
        nn.init.constant_(self.weight, 1.0 - self.cfg.offset)

    def forward(self, x: Tensor) -> Tensor:
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.cfg.eps)
        if self.cfg.offset:  # Gemma: the whole product in fp32, then cast
            return (h * (self.cfg.offset + self.weight.float())).to(x.dtype)
        return self.weight * h.to(x.dtype)
