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
        if x.element_size() < 4:  # 16-bit: each head's fused norm rounds once (StableLM's)
            heads = [self._one_head(x[:, h : h + 1], h) for h in range(weight.shape[0])]
            return torch.cat(heads, dim=1)  # (B, H, T, d)
        h = F.layer_norm(x, x.shape[-1:], eps=self.cfg.eps) * weight[:, None]  # (B, H, T, d)
        return h if bias is None else h + bias[:, None]

    def _one_head(self, x: Tensor, h: int) -> Tensor:
        """Head h's LayerNorm with its own scale and shift, in one kernel. x: (B, 1, T, d)."""
        bias = None if self.bias is None else self.bias[h]
        return torch.layer_norm(x, x.shape[-1:], self.weight[h], bias, self.cfg.eps)
