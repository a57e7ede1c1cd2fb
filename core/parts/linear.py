"""Linear projections whose bias may be added apart from the matmul.

`F.linear(x, W, b)` adds the bias inside the matmul kernel and rounds once; a checkpoint
whose reference code writes `x @ W.T + b` (Falcon) rounds the product first in 16-bit floats.
Both keep the parameters `weight` and `bias` of `nn.Linear`, so weights load either way.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class BiasAfterMatmulLinear(nn.Linear):
    """nn.Linear computing `x @ W.T + b`: the product rounded to x's dtype, then the bias."""

    def forward(self, x: Tensor) -> Tensor:
        y = F.linear(x, self.weight)
        return y if self.bias is None else y + self.bias


def make_linear(d_in: int, d_out: int, *, bias: bool, bias_add: str = "fused") -> nn.Linear:
    """nn.Linear, or `BiasAfterMatmulLinear` when the bias is added after the matmul
    (`bias_add="after_matmul"`)."""
    after = bias_add == "after_matmul"
    return (BiasAfterMatmulLinear if after else nn.Linear)(d_in, d_out, bias=bias)


class KeepsFloat32(nn.Module):
    """A module whose tensors named in `float32_names` (own parameters and buffers) stay in
    float32 when the model moves to another dtype, with their float32 values (transformers'
    `_keep_in_fp32_modules`: DeepSeek-V3's router)."""

    float32_names: tuple[str, ...] = ()

    def _apply(self, fn: Any, recurse: bool = True) -> nn.Module:
        own = {**self._parameters, **self._buffers}
        kept = {n: own[n].detach() for n in self.float32_names if own.get(n) is not None}
        super()._apply(fn, recurse)
        for name, before in kept.items():
            now = self._parameters.get(name)
            now = self._buffers[name] if now is None else now
            exact = before.dtype == torch.float32 and not (before.is_meta or now.is_meta)
            src = before if exact else now.detach()
            now.data = src.to(device=now.device, dtype=torch.float32)
        return self


class Float32Linear(KeepsFloat32, nn.Linear):
    """nn.Linear in float32 whatever the model's dtype: inputs cast up, float32 outputs."""

    float32_names = ("weight", "bias")

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(x.float(), self.weight, self.bias)
