"""Fixed attention (Child et al., 2019, Sparse Transformer): the query's own stride block,
plus the last `summary` positions of every stride block ("summary" cells).

A(1)_i = {k : floor(k / l) = floor(i / l)}, A(2)_i = {k : k mod l >= l - c}; the causal
mask, when applied, keeps only keys up to the query.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from archzoo.parts.component import param

from .sparse import SparseAttention, SparsePattern, key_block_any


class FixedPattern(SparsePattern):
    """Same stride block, or a summary position (k mod stride >= stride - summary)."""

    def __init__(self, stride: int, summary: int, block: int) -> None:
        self.stride, self.summary, self.block = stride, summary, block

    def allowed(self, q: Tensor, k: Tensor, length: int) -> Tensor:
        l = self.stride  # noqa: E741 - the paper's name
        return (q.div(l, rounding_mode="floor") == k.div(l, rounding_mode="floor")) | (
            k.remainder(l) >= l - self.summary
        )

    def layout(self, n_blocks: int, length: int) -> Tensor:
        l, bs = self.stride, self.block  # noqa: E741
        start = torch.arange(n_blocks) * bs
        first, last = start // l, (start + bs - 1) // l  # stride blocks each block touches
        same = (first[:, None] <= last[None, :]) & (first[None, :] <= last[:, None])
        summary = torch.arange(n_blocks * bs).remainder(l) >= l - self.summary
        return same | key_block_any(summary, n_blocks, bs)[None, :]


class FixedAttention(SparseAttention, name="fixed"):
    """Sparse Transformer fixed pattern: own stride block + summary positions"""

    class Config(SparseAttention.Config):
        stride: int = param(128, "l: length of the fixed blocks", min=1)
        summary: int = param(8, "c: last positions of each block that every query sees", min=1)
        block: int = param(64, "query/key block of the blocked path", min=1)

    @classmethod
    def check(cls, cfg: Any, dims: Any) -> list[tuple[str, str]]:
        issues = super().check(cfg, dims)
        if cfg.summary > cfg.stride:
            issues.append(("summary", f"must be <= stride {cfg.stride}, got {cfg.summary}"))
        return issues

    def make_pattern(self, length: int, device: Any = None, ctx: Any = None) -> SparsePattern:
        return FixedPattern(self.cfg.stride, self.cfg.summary, self.cfg.block)
