"""LayerNorm (Ba et al., 2016) with optional bias."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from archzoo.component import param

from .scaled import ScaledNorm


class LayerNorm(ScaledNorm, name="layernorm"):
    """LayerNorm: normalise to zero mean and unit variance, then scale and shift"""

    class Config:
        eps: float = param(1e-5, "added to the variance", gt=0.0)
        bias: bool = param(True, "learn a shift as well as a scale")

    def forward(self, x: Tensor) -> Tensor:
        weight, bias = self.weight, self.bias
        if weight.dim() == 1:  # torch.layer_norm: F.layer_norm's kernel without its wrapper
            return torch.layer_norm(x, weight.shape, weight, bias, self.cfg.eps)
        h = F.layer_norm(x, x.shape[-1:], eps=self.cfg.eps) * weight[:, None]  # (B, H, T, d)
        return h if bias is None else h + bias[:, None]
