"""LayerNorm (Ba et al., 2016) with optional scale and bias."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from archzoo.parts.component import param

from .scaled import ScaledNorm


class LayerNorm(ScaledNorm, name="layernorm"):
    """LayerNorm: normalise to zero mean and unit variance, then scale and shift"""

    class Config:
        eps: float = param(1e-5, "added to the variance", gt=0.0)
        bias: bool = param(True, "learn a shift as well as a scale")
        scale: bool = param(True, "learn a scale; false: no weight (OLMo's norm has neither)")
        offset: float = param(
            0.0, "scale by (offset + weight); Nemotron stores weight = scale - 1 (offset 1)"
        )

    def scales(self) -> bool:
        """Whether to learn a scale: the config's `scale`."""
        return self.cfg.scale

    def init_weights(self, std: float) -> None:
        """A unit scale (weight 1 - offset) and a zero shift."""
        if self.weight is not None:
            nn.init.constant_(self.weight, 1.0 - self.cfg.offset)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, x: Tensor) -> Tensor:
        weight, bias = self.weight, self.bias
        if weight is not None and self.cfg.offset:
            weight = weight + self.cfg.offset
        if weight is None:  # no scale: normalise, then shift
            h = F.layer_norm(x, x.shape[-1:], eps=self.cfg.eps)
            return h if bias is None else h + (bias if bias.dim() == 1 else bias[:, None])
        if weight.dim() == 1:  # torch.layer_norm: F.layer_norm's kernel without its wrapper
            return torch.layer_norm(x, weight.shape, weight, bias, self.cfg.eps)
        if x.element_size() < 4:  # 16-bit: each head's fused norm rounds once (StableLM's)
            heads = [self._one_head(x[:, h : h + 1], weight, h) for h in range(weight.shape[0])]
            return torch.cat(heads, dim=1)  # (B, H, T, d)
        h = F.layer_norm(x, x.shape[-1:], eps=self.cfg.eps) * weight[:, None]  # (B, H, T, d)
        return h if bias is None else h + bias[:, None]

    def _one_head(self, x: Tensor, weight: Tensor, h: int) -> Tensor:
        """Head h's LayerNorm with its own scale and shift, in one kernel. x: (B, 1, T, d)."""
        bias = None if self.bias is None else self.bias[h]
        return torch.layer_norm(x, x.shape[-1:], weight[h], bias, self.cfg.eps)
