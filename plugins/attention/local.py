"""Sliding-window attention: each query sees the keys within `window` positions of it.

Causal: keys q - window < k <= q, i.e. `window` keys including the query itself, exactly
Mistral's `sliding_window` and GPT-Neo's `window_size`. Bidirectional: |q - k| < window.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torch import Tensor

from archzoo.component import param

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


class LocalAttention(SparseAttention):
    name = "local"
    summary = "sliding-window attention (Mistral sliding_window, GPT-Neo local), O(n*window)"

    @dataclass
    class Config(SparseAttention.Config):
        window: int = param(256, "keys per query including itself (causal); |q-k| < window", min=1)
        block: int | None = param(None, "query/key block of the blocked path (null: window)", min=1)

    def make_pattern(self, length: int, device: Any = None) -> SparsePattern:
        w = self.cfg.window
        return LocalPattern(w, self.cfg.block or max(w, 16))
