"""Linear projections whose bias may be added apart from the matmul.

`F.linear(x, W, b)` adds the bias inside the matmul kernel and rounds once; a checkpoint
whose reference code writes `x @ W.T + b` (Falcon) rounds the product first in 16-bit floats.
Both keep the parameters `weight` and `bias` of `nn.Linear`, so weights load either way.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn


class BiasApartLinear(nn.Linear):
    """nn.Linear computing `x @ W.T + b`: the product rounded to x's dtype, then the bias."""

    def forward(self, x: Tensor) -> Tensor:
        y = F.linear(x, self.weight)
        return y if self.bias is None else y + self.bias


def make_linear(d_in: int, d_out: int, *, bias: bool, bias_apart: bool = False) -> nn.Linear:
    """nn.Linear, or `BiasApartLinear` when the bias is added after the matmul."""
    return (BiasApartLinear if bias_apart else nn.Linear)(d_in, d_out, bias=bias)
