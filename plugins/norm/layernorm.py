"""LayerNorm (Ba et al., 2016) with optional bias."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from archzoo.component import param
from archzoo.interfaces import Norm


class LayerNorm(Norm):
    name = "layernorm"
    summary = "LayerNorm: normalise to zero mean and unit variance, then scale and shift"

    @dataclass
    class Config:
        eps: float = param(1e-5, "added to the variance", gt=0.0)
        bias: bool = param(True, "learn a shift as well as a scale")

    def __init__(self, cfg: Any, dims: Any, dim: int | None = None) -> None:
        super().__init__(cfg, dims)
        dim = dim or dims.d_model
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim)) if cfg.bias else None

    def forward(self, x: Tensor) -> Tensor:
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, self.cfg.eps)
