"""Transient-global attention (Guo et al., 2022, LongT5): block-local attention plus, for
every query, one summary key per `global_block` tokens: the block's input states summed,
normalised and projected, made afresh in each layer and biased by block distance."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from archzoo.parts.component import param
from archzoo.parts.interfaces import AttentionContext, NormFactory

from .block_local import BlockLocalAttention, SideKeys


def global_block_ids(valid: Tensor, size: int) -> Tensor:
    """(B, T) summary index of each token: its block of `size`, a trailing partial block
    joining the one before, -1 for padding (and for rows shorter than one block)."""
    t = torch.arange(valid.shape[1], device=valid.device)
    ids = torch.where(valid, t // size, -1)  # (B, T)
    last = ((t % size == size - 1) & valid).sum(-1, keepdim=True) - 1  # (B, 1) last whole block
    return torch.minimum(ids, last)


def summary_documents(docs: Tensor, slot: Tensor, n: int) -> Tensor:
    """(B, T, G) bool: summary g sums tokens of token t's document alone (packed rows:
    a summary over two documents is hidden from both). docs, slot (B, T): each token's
    document and summary (n: none)."""
    B = docs.shape[0]
    low = docs.new_full((B, n + 1), torch.iinfo(docs.dtype).max).scatter_reduce(
        1, slot, docs, "amin"
    )
    high = docs.new_full((B, n + 1), -1).scatter_reduce(1, slot, docs, "amax")
    pure = (low == high)[:, :n]  # (B, G) one document, and some token
    return pure[:, None, :] & (docs[:, :, None] == low[:, None, :n])


class TransientGlobalAttention(BlockLocalAttention, name="transient_global", accepts_rotate=False):
    """LongT5 transient-global: block-local plus a summary key per global block"""

    class Config(BlockLocalAttention.Config):
        global_block: int = param(16, "tokens summed into each global summary", min=1)

    def __init__(
        self, cfg: Any, dims: Any, *, cross: bool = False, make_norm: NormFactory | None = None
    ) -> None:
        super().__init__(cfg, dims, cross=cross, make_norm=make_norm)
        if make_norm is None:
            raise ValueError("transient_global needs the spec's norm factory (make_norm)")
        self.global_norm = make_norm()  # on the summed block states

    @classmethod
    def check(cls, cfg: Any, dims: Any) -> list[tuple[str, str]]:
        issues = super().check(cfg, dims)
        if cfg.qk_norm != "none":
            issues.append(("qk_norm", f"not supported by {cls.name} (summary keys have none)"))
        return issues

    def _summary_kv(self, summary: Tensor) -> tuple[Tensor, Tensor]:
        """k and v (B, Hkv, G, hd) of the summaries through this layer's projections."""
        if hasattr(self, "qkv"):
            _, k, v = self.qkv(summary).split([self.q_dim, self.kv_dim, self.kv_dim], dim=-1)
        else:
            k, v = self.k(summary), self.v(summary)
        return self._heads(self._clip(k), self.n_kv), self._heads(self._clip(v), self.n_kv)

    def side_keys(self, x: Tensor, valid: Tensor, ctx: AttentionContext) -> SideKeys:
        B, T, D = x.shape
        size = self.cfg.global_block
        G = T // size
        ids = global_block_ids(valid.expand(B, T), size)  # (B, T)
        slot = torch.where(ids >= 0, ids, G)  # padding into a dropped extra slot
        summary = x.new_zeros(B, G + 1, D).scatter_add_(1, slot[..., None].expand(B, T, D), x)
        k, v = self._summary_kv(self.global_norm(summary[:, :G]))  # (B, Hkv, G, hd)
        blocks = torch.arange(G, device=x.device)
        filled = blocks[None, :] <= ids.max(-1, keepdim=True).values  # (B, G) has real tokens
        keep = valid.expand(B, T)[:, :, None] & filled[:, None, :]  # (B, T, G)
        if ctx.mask.key_docs is not None:
            keep = keep & summary_documents(ctx.mask.key_docs, slot, G)  # (B, T, G)
        return SideKeys(
            k, v, keep, self._summary_bias(ctx, blocks[None, None, :] - ids[:, :, None])
        )

    def _summary_bias(self, ctx: AttentionContext, distance: Tensor) -> Tensor | None:
        """The position's bias (B, H, T, G) by block distance (B, T, G); none for a position
        that biases no scores, refused for one that biases tokens but not summaries."""
        position = ctx.position
        if position is None or not position.capabilities.bias:
            return None
        side_bias = getattr(position, "side_bias", None)
        if side_bias is None:
            raise ValueError(
                f"attention {self.name!r} needs a position with a table for its summaries "
                f"(t5_windowed with global_table: true), got {position.name!r}"
            )
        return side_bias(distance)
