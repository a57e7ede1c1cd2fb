"""Global-local attention (Phang et al., 2022, PEGASUS-X's encoder).

The embedding places `G` global vectors before the tokens (`embedding.global_tokens`; the
layer reads G from `ctx.prefix`). A global position sees every key; a token sees the global
positions and the tokens of its own block of `block_size`, blocks counted from the first
token, or from half a block before it when `stagger` (PEGASUS-X staggers every other layer).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from archzoo.parts.component import param
from archzoo.parts.interfaces import AttentionContext

from .sparse import SparseAttention, SparsePattern, band_layout


class GlobalLocalPattern(SparsePattern):
    """q or k among the first `n_global` positions, or both tokens in one local block."""

    def __init__(self, n_global: int, size: int, stagger: bool, block: int) -> None:
        self.n_global, self.size, self.block = n_global, size, block
        self.shift = size // 2 if stagger else 0  # the first block is half a block short

    def local_block(self, p: Tensor) -> Tensor:
        """The local block of token position p (its index after the global positions)."""
        return (p - self.n_global + self.shift).div(self.size, rounding_mode="floor")

    def allowed(self, q: Tensor, k: Tensor, length: int) -> Tensor:
        G = self.n_global
        return (q < G) | (k < G) | (self.local_block(q) == self.local_block(k))

    def layout(self, n_blocks: int, length: int) -> Tensor:
        """The band |q - k| < size (a block's tokens) and the key blocks holding globals."""
        band = band_layout(n_blocks, self.block, -(self.size - 1), self.size - 1)
        starts = torch.arange(n_blocks) * self.block
        return band | (starts < self.n_global)[None, :]

    def global_queries(self, length: int, device: torch.device) -> Tensor | None:
        return torch.arange(min(self.n_global, length), device=device) if self.n_global else None


class GlobalLocalAttention(
    SparseAttention, name="global_local", causal=False, kv_cache=False, accepts_rotate=False
):
    """global tokens that see all, tokens that see the globals and their block (PEGASUS-X)"""

    class Config(SparseAttention.Config):
        block_size: int = param(512, "tokens per local block (PEGASUS-X: block_size)", min=1)
        stagger: bool = param(
            False, "blocks start half a block early (PEGASUS-X: every other layer)"
        )
        block: int | None = param(
            None, "query/key block of the blocked path (null: min(block_size, 64))", min=1
        )

    @classmethod
    def check(cls, cfg: Any, dims: Any) -> list[tuple[str, str]]:
        issues = super().check(cfg, dims)
        if cfg.stagger and cfg.block_size % 2:
            issues.append(("stagger", f"needs an even block_size, got {cfg.block_size}"))
        if cfg.sinks or cfg.softcap is not None:
            issues.append(("sinks" if cfg.sinks else "softcap", f"not supported by {cls.name}"))
        return issues

    def make_pattern(
        self, length: int, device: Any = None, ctx: AttentionContext | None = None
    ) -> SparsePattern:
        cfg = self.cfg
        n_global = 0 if ctx is None else ctx.prefix
        return GlobalLocalPattern(
            n_global, cfg.block_size, cfg.stagger, cfg.block or min(cfg.block_size, 64)
        )
