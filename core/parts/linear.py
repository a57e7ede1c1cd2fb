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


class GroupedLinear(nn.Linear):
    """A block-diagonal linear map: the d_in inputs and d_out outputs in `groups` equal
    groups, each group's outputs computed from its own inputs only (a 1x1 convolution with
    `groups`, SqueezeBERT). `weight` holds the blocks stacked, (d_out, d_in / groups), the
    layout of Conv1d's weight without its kernel dimension."""

    def __init__(self, d_in: int, d_out: int, *, groups: int, bias: bool) -> None:
        if d_in % groups or d_out % groups:
            raise ValueError(f"groups {groups} must divide d_in {d_in} and d_out {d_out}")
        super().__init__(d_in // groups, d_out, bias=bias)
        self.in_features, self.groups = d_in, groups

    def forward(self, x: Tensor) -> Tensor:
        g = self.groups
        xg = x.unflatten(-1, (g, -1))  # (..., g, d_in / g)
        w = self.weight.view(g, -1, self.weight.shape[-1])  # (g, d_out / g, d_in / g)
        y = torch.einsum("...gi,goi->...go", xg, w).flatten(-2)  # (..., d_out)
        return y if self.bias is None else y + self.bias


def make_linear(
    d_in: int, d_out: int, *, bias: bool, bias_add: str = "fused", groups: int = 1
) -> nn.Linear:
    """nn.Linear, `BiasAfterMatmulLinear` when the bias is added after the matmul
    (`bias_add="after_matmul"`), or `GroupedLinear` when `groups` > 1 (block-diagonal)."""
    if groups > 1:
        return GroupedLinear(d_in, d_out, groups=groups, bias=bias)
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
