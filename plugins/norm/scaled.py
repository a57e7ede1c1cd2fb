"""The learned scale (and shift) both built-in norms carry, per feature or per head."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from archzoo.parts.interfaces import Norm


class ScaledNorm(Norm):
    """Base of `layernorm` and `rmsnorm`: a `weight` (optional in layernorm) and an optional
    `bias` of width `dim` (default d_model), one row per head when `heads` is given, for
    (B, heads, T, dim) input."""

    def __init__(
        self,
        cfg: Any,
        dims: Any,
        dim: int | None = None,
        *,
        heads: int | None = None,
        bias: bool | None = None,
        scale: bool | None = None,
    ) -> None:
        """`bias` and `scale` override the config's shift and scale (q/k norms without)."""
        super().__init__(cfg, dims)
        dim = dim or dims.d_model
        shape = (dim,) if heads is None else (heads, dim)
        scales = self.scales() if scale is None else scale
        self.weight = nn.Parameter(torch.ones(shape)) if scales else None
        shift = self.shifts(bias)
        self.bias = nn.Parameter(torch.zeros(shape)) if shift else None

    def scales(self) -> bool:
        """Whether to learn a scale: always, unless a norm says otherwise."""
        return True

    def shifts(self, bias: bool | None) -> bool:
        """Whether to learn a shift: `bias` when given, else the config's `bias`."""
        return self.cfg.bias if bias is None else bias
