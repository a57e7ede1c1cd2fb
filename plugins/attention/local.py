"""Sliding-window attention: each query sees the keys within `window` positions of it.

Causal: keys q - window < k <= q, i.e. `window` keys including the query itself, exactly
Mistral's `sliding_window` and GPT-Neo's `window_size`. Bidirectional: |q - k| < window.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor

from archzoo.parts.attention_probs import scatter_keys
from archzoo.parts.component import param
from archzoo.parts.interfaces import AttentionContext
from archzoo.parts.masks import AttentionMask

from .sparse import SparseAttention, SparsePattern, band_layout


class LocalPattern(SparsePattern):
    """|q - k| < window (the causal mask, when applied, keeps q - window < k <= q)."""

    def __init__(self, window: int, block: int) -> None:
        self.window, self.block = window, block

    def allowed(self, q: Tensor, k: Tensor, length: int) -> Tensor:
        d = q - k
        return (d < self.window) & (d > -self.window)

    def layout(self, n_blocks: int, length: int) -> Tensor:
        w = self.window
        return band_layout(n_blocks, self.block, -(w - 1), w - 1)


class LocalAttention(SparseAttention, name="local"):
    """sliding-window attention (Mistral sliding_window, GPT-Neo local), O(n*window)"""

    class Config(SparseAttention.Config):
        window: int = param(256, "keys per query including itself (causal); |q-k| < window", min=1)
        block: int | None = param(None, "query/key block of the blocked path (null: window)", min=1)

    def make_pattern(self, length: int, device: Any = None, ctx: Any = None) -> SparsePattern:
        w = self.cfg.window
        return LocalPattern(w, self.cfg.block or max(w, 16))

    def cache_layout(self) -> tuple[int, int, int | None]:
        return self.n_kv, self.head_dim, self.cfg.window  # decoding keeps only the window

    def attend(
        self, x: Tensor, ctx: AttentionContext, memory: Tensor | None = None
    ) -> tuple[Tensor, Tensor | None]:
        cache = ctx.cache
        if cache is None or cache.window is None:
            return super().attend(x, ctx, memory)
        q, k, v = self.project(x, ctx.with_cache(None), None)
        index, valid = ctx.mask.query_positions(), ctx.mask.query_valid(x.shape[0])
        if cache.length == 0 and ctx.mask.q_offset == 0:  # prefill: the blocked path
            out = self.attend_qkv(x, q, k, v, ctx)
            cache.store(k, v, index, valid)  # then keep only the prompt's last window
            return out
        return self._decode(q, k, v, ctx, index, valid)

    def _decode(
        self, q: Tensor, k: Tensor, v: Tensor, ctx: AttentionContext, index: Tensor, valid: Tensor
    ) -> tuple[Tensor, Tensor | None]:
        """New queries (at sequence positions `index`) against the cached window plus the new
        keys (B, Hkv, W + T, hd)."""
        B, _, Tq, _ = q.shape
        keys, values, key_index, key_valid = ctx.cache.extend(k, v, index, valid)
        q_index = index[:, None]  # (Tq, 1) sequence index of each query
        keep = (key_index[None] <= q_index) & (key_index[None] > q_index - self.cfg.window)
        keep = keep & (key_index[None] >= 0)  # (Tq, S)
        keep = keep[None] & key_valid[:, None, :]  # (B, Tq, S)
        window = AttentionMask.from_keep(keep[:, None])
        scoring = self.make_scoring(q, keys, ctx.with_cache(None))
        out, probs = self.run_kernel(q, keys, values, window, scoring)  # (B, H, Tq, hd)
        if ctx.want_probs:  # over the window's keys, scattered to their sequence positions
            probs = scatter_keys(probs, key_index, ctx.mask.k_len)
        return self.out(out.transpose(1, 2).reshape(B, Tq, self.q_dim)), probs
