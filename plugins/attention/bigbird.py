"""BigBird (Zaheer et al., 2020), ITC variant: window + global + random key blocks.

Every query block sees `window_blocks` blocks around it, the first and last `global_blocks`
blocks (which in turn see everything), and `random_blocks` blocks drawn by a seeded hash
of (seed, query block, draw): the same model gives the same pattern on every run and device.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from archzoo.component import param

from .block_sparse import BlockLayoutPattern
from .sparse import SparseAttention, SparsePattern

MASK32 = 0xFFFFFFFF


def hashed_blocks(n_blocks: int, draws: int, seed: int) -> Tensor:
    """(nb, draws) key blocks in [0, nb), a deterministic integer hash of (seed, row, draw)."""
    i = torch.arange(n_blocks, dtype=torch.int64)[:, None]
    t = torch.arange(draws, dtype=torch.int64)[None, :]
    x = (i * 0x9E3779B1 + t * 0x85EBCA77 + (seed & MASK32) * 0xC2B2AE3D + 1) & MASK32
    for _ in range(2):
        x = (((x >> 16) ^ x) * 0x45D9F3B) & MASK32
    x = (x >> 16) ^ x
    return x % n_blocks


def bigbird_layout(
    n_blocks: int, *, window_blocks: int, global_blocks: int, random_blocks: int, seed: int
) -> Tensor:
    """Bool (nb, nb) block layout of BigBird's window, global and random blocks."""
    i = torch.arange(n_blocks)
    layout = (i[:, None] - i[None, :]).abs() <= window_blocks // 2
    g = (i < global_blocks) | (i >= n_blocks - global_blocks)
    layout |= g[:, None] | g[None, :]
    if random_blocks > 0:
        rows = i[:, None].expand(-1, random_blocks)
        layout[rows, hashed_blocks(n_blocks, random_blocks, seed)] = True
    return layout


# no KV cache: the last global blocks and the random draws depend on the sequence length
class BigBirdAttention(SparseAttention, name="bigbird", kv_cache=False):
    """BigBird block-sparse attention: window + global + seeded random blocks"""

    class Config(SparseAttention.Config):
        block: int = param(64, "block size", min=1)
        window_blocks: int = param(3, "blocks in the sliding window (odd: centred)", min=1)
        global_blocks: int = param(1, "global blocks at each end of the sequence", min=0)
        random_blocks: int = param(3, "random key blocks per query block", min=0)
        seed: int = param(0, "seed of the random blocks", min=0)

    def make_pattern(self, length: int, device: Any = None, ctx: Any = None) -> SparsePattern:
        if self._pattern is None:
            self._pattern = BlockLayoutPattern(self._layout, self.cfg.block)
        return self._pattern

    _pattern: BlockLayoutPattern | None = None

    def _layout(self, n_blocks: int) -> Tensor:
        cfg = self.cfg
        return bigbird_layout(
            n_blocks,
            window_blocks=cfg.window_blocks,
            global_blocks=cfg.global_blocks,
            random_blocks=cfg.random_blocks,
            seed=cfg.seed,
        )
