"""An elementwise scale and shift that normalises nothing (MobileBERT's NoNorm)."""

from __future__ import annotations

from torch import Tensor

from archzoo.parts.component import param

from .scaled import ScaledNorm


class AffineNorm(ScaledNorm, name="affine"):
    """x * weight + bias per feature, without normalising (a norm's slot at a fraction of its cost)"""

    class Config:
        bias: bool = param(True, "learn a shift as well as a scale")

    def forward(self, x: Tensor) -> Tensor:
        w = self.weight if self.weight.dim() == 1 else self.weight[:, None]  # (H, 1, d) per head
        out = x * w
        if self.bias is None:
            return out
        return out + (self.bias if self.bias.dim() == 1 else self.bias[:, None])
