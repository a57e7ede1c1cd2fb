"""LayerNorm (Ba et al., 2016) with optional bias."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from archzoo.component import param
from archzoo.interfaces import Norm


class LayerNorm(Norm, name="layernorm"):
    """LayerNorm: normalise to zero mean and unit variance, then scale and shift"""

    class Config:
        eps: float = param(1e-5, "added to the variance", gt=0.0)
        bias: bool = param(True, "learn a shift as well as a scale")

    def __init__(
        self,
        cfg: Any,
        dims: Any,
        dim: int | None = None,
        *,
        heads: int | None = None,
        bias: bool | None = None,
    ) -> None:
        """`heads`: a scale (and shift) per head for (B, heads, T, dim) input; `bias`
        overrides the config's (a q/k norm without shift)."""
        super().__init__(cfg, dims)
        dim = dim or dims.d_model
        shape = (dim,) if heads is None else (heads, dim)
        self.weight = nn.Parameter(torch.ones(shape))
        shift = cfg.bias if bias is None else bias
        self.bias = nn.Parameter(torch.zeros(shape)) if shift else None

    def forward(self, x: Tensor) -> Tensor:
        if self.weight.dim() == 1:
            return F.layer_norm(x, self.weight.shape, self.weight, self.bias, self.cfg.eps)
        h = F.layer_norm(x, x.shape[-1:], eps=self.cfg.eps) * self.weight[:, None]  # (B, H, T, d)
        return h if self.bias is None else h + self.bias[:, None]
