"""Block-sparse attention: an arbitrary layout of (query block, key block) pairs.

The layout is given (a 0/1 matrix, one row per query block) or generated from a pattern
of local, strided and global blocks. Within an allowed block pair every query sees every
key; block rows that are entirely allowed are computed as global rows.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from archzoo.parts.component import param

from .sparse import SparseAttention, SparsePattern


class BlockLayoutPattern(SparsePattern):
    """allowed(q, k) = layout[q // block, k // block], the layout made per block count."""

    def __init__(self, make_layout: Callable[[int], Tensor], block: int) -> None:
        self.make_layout, self.block = make_layout, block
        self._cache: dict[tuple[int, str], Tensor] = {}

    def block_layout(self, n_blocks: int, device: Any = None) -> Tensor:
        """Bool (nb, nb) on `device`, made once per (nb, device)."""
        key = (n_blocks, str(device))
        if key not in self._cache:
            self._cache[key] = self.make_layout(n_blocks).to(device=device, dtype=torch.bool)
        return self._cache[key]

    def allowed(self, q: Tensor, k: Tensor, length: int) -> Tensor:
        layout = self.block_layout(math.ceil(length / self.block), q.device)
        return layout[
            q.div(self.block, rounding_mode="floor"), k.div(self.block, rounding_mode="floor")
        ]

    def layout(self, n_blocks: int, length: int) -> Tensor:
        return self.block_layout(n_blocks)

    def global_queries(self, length: int, device: torch.device) -> Tensor | None:
        layout = self.block_layout(math.ceil(length / self.block), device)
        full = layout.all(-1).nonzero().flatten()  # (G,) fully allowed block rows
        if full.numel() == 0 or full.numel() == layout.shape[0]:
            return None
        rows = (full[:, None] * self.block + torch.arange(self.block, device=device)).flatten()
        return rows[rows < length]


def generated_layout(
    n_blocks: int, *, local_blocks: int, global_blocks: int, stride_blocks: int
) -> Tensor:
    """Local band of `local_blocks` each side, every `stride_blocks`-th block diagonal, and
    the first `global_blocks` blocks as global rows and columns."""
    i = torch.arange(n_blocks)
    d = i[:, None] - i[None, :]
    layout = d.abs() <= local_blocks
    if stride_blocks > 0:
        layout |= d.remainder(stride_blocks) == 0
    if global_blocks > 0:
        g = i < global_blocks
        layout |= g[:, None] | g[None, :]
    return layout


class BlockSparseAttention(SparseAttention, name="block_sparse"):
    """block-sparse attention over a given or generated (query block, key block) layout"""

    class Config(SparseAttention.Config):
        block: int = param(64, "block size of the layout", min=1)
        layout: list[list[int]] | None = param(
            None, "0/1 rows, one per query block (null: generate from the keys below)"
        )
        local_blocks: int = param(1, "generated: blocks on each side of the diagonal", min=0)
        global_blocks: int = param(0, "generated: first blocks attending / attended by all", min=0)
        stride_blocks: int = param(0, "generated: also every n-th block diagonal (0: none)", min=0)

    @classmethod
    def check(cls, cfg: Any, dims: Any) -> list[tuple[str, str]]:
        issues = super().check(cfg, dims)
        if cfg.layout is not None:
            n = len(cfg.layout)
            if any(len(row) != n for row in cfg.layout):
                issues.append(("layout", f"must be square: {n} rows of {n} zeros and ones"))
            elif any(v not in (0, 1) for row in cfg.layout for v in row):
                issues.append(("layout", "entries must be 0 or 1"))
            elif n * cfg.block < dims.max_len:
                issues.append(
                    (
                        "layout",
                        f"covers {n} blocks of {cfg.block} = {n * cfg.block} positions, "
                        f"fewer than max_len {dims.max_len}",
                    )
                )
        return issues

    def make_pattern(self, length: int, device: Any = None, ctx: Any = None) -> SparsePattern:
        cfg = self.cfg
        if self._pattern is None:
            self._pattern = BlockLayoutPattern(self._layout, cfg.block)
        return self._pattern

    _pattern: BlockLayoutPattern | None = None

    def _layout(self, n_blocks: int) -> Tensor:
        cfg = self.cfg
        if cfg.layout is None:
            return generated_layout(
                n_blocks,
                local_blocks=cfg.local_blocks,
                global_blocks=cfg.global_blocks,
                stride_blocks=cfg.stride_blocks,
            )
        given = torch.tensor(cfg.layout, dtype=torch.bool)
        if n_blocks > given.shape[0]:
            raise ValueError(
                f"block_sparse layout has {given.shape[0]} blocks of {cfg.block}; "
                f"a sequence of {n_blocks} blocks does not fit"
            )
        return given[:n_blocks, :n_blocks]
