"""Strided attention (Child et al., 2019, Sparse Transformer): the last `stride` positions
plus every `stride`-th position before them, merged into one pattern.

A(1)_i = {k : 0 <= i - k <= stride}, A(2)_i = {k : (i - k) mod stride = 0}. Bidirectional
use mirrors both sets (|i - k| <= stride, or a multiple of stride apart).
"""

from __future__ import annotations

from typing import Any

from torch import Tensor

from archzoo.parts.component import param

from .sparse import SparseAttention, SparsePattern, block_differences


class StridedPattern(SparsePattern):
    """|q - k| <= stride, or q - k a multiple of stride."""

    def __init__(self, stride: int, block: int) -> None:
        self.stride, self.block = stride, block

    def allowed(self, q: Tensor, k: Tensor, length: int) -> Tensor:
        d = q - k
        return (d.abs() <= self.stride) | (d.remainder(self.stride) == 0)

    def layout(self, n_blocks: int, length: int) -> Tensor:
        dmin, dmax = block_differences(n_blocks, self.block)
        local = (dmax >= -self.stride) & (dmin <= self.stride)
        column = dmax.div(self.stride, rounding_mode="floor") * self.stride >= dmin
        return local | column


class StridedAttention(SparseAttention, name="strided"):
    """Sparse Transformer strided pattern: local stride + every stride-th key"""

    class Config(SparseAttention.Config):
        stride: int = param(128, "l: local span and column period (about sqrt(n))", min=1)
        block: int = param(64, "query/key block of the blocked path", min=1)

    def make_pattern(self, length: int, device: Any = None, ctx: Any = None) -> SparsePattern:
        return StridedPattern(self.cfg.stride, self.cfg.block)
