"""RMSNorm (Zhang & Sennrich, 2019): scale by the root mean square, no centring."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from archzoo.parts.component import param

from .scaled import ScaledNorm


class RMSNorm(ScaledNorm, name="rmsnorm"):
    """RMSNorm: divide by the root mean square (computed in fp32), then scale"""

    class Config:
        eps: float = param(1e-6, "added to the mean square", gt=0.0)
        scale: bool = param(True, "learn a scale; false: no weight, x / rms(x) (NanoChat)")
        offset: float = param(
            0.0, "scale by (offset + weight), in fp32; Gemma stores weight = scale - 1 (offset 1)"
        )
        scale_fp32: bool = param(
            False,
            "multiply by the weight in fp32 and round once (OLMo 2); false: round the "
            "normalised input first, then scale in its dtype (Llama)",
        )

    def scales(self) -> bool:
        """Whether to learn a scale: the config's `scale`."""
        return self.cfg.scale

    def shifts(self, bias: bool | None) -> bool:
        """Never: RMSNorm has no shift."""
        if bias:
            raise ValueError("rmsnorm has no bias (a shift); use layernorm")
        return False

    def init_weights(self, std: float) -> None:
        """A unit scale: weight 1 - offset."""
        if self.weight is not None:
            nn.init.constant_(self.weight, 1.0 - self.cfg.offset)

    def forward(self, x: Tensor) -> Tensor:
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.cfg.eps)
        if self.weight is None:  # no scale: rounded once
            return h.to(x.dtype)
        w = self.weight if self.weight.dim() == 1 else self.weight[:, None]  # (H, 1, d) per head
        if self.cfg.offset:  # Gemma: the whole product in fp32, then cast
            return (h * (self.cfg.offset + w.float())).to(x.dtype)
        if self.cfg.scale_fp32:
            return (h * w.float()).to(x.dtype)
        return w * h.to(x.dtype)
