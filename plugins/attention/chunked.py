"""Chunked attention (Llama 4's `attention_chunk_size`): the sequence is cut into chunks of
`chunk` tokens and each query sees only the keys of its own chunk (causal: those up to itself).

Chunks count from each row's first real token: a left-padded row's chunks start after its
padding, as transformers' chunked mask starts them. Positions q and k of one chunk are
at most `chunk - 1` apart, so the blocked path runs the band |q - k| < chunk in O(n * chunk).
Decoding keeps every key (a chunk boundary can fall anywhere in the window).
"""

from __future__ import annotations

from typing import Any

from torch import Tensor

from archzoo.parts.component import param
from archzoo.parts.interfaces import AttentionContext

from .sparse import SparseAttention, SparsePattern, band_layout


class ChunkPattern(SparsePattern):
    """(q - s) // chunk == (k - s) // chunk, s the row's first real position (`starts` (B,),
    None: 0 for every row)."""

    def __init__(self, chunk: int, block: int, starts: Tensor | None = None) -> None:
        self.chunk, self.block, self.starts = chunk, block, starts
        self.per_batch = starts is not None

    def allowed(self, q: Tensor, k: Tensor, length: int) -> Tensor:
        if self.starts is None:
            return self._chunk(q, 0) == self._chunk(k, 0)
        s = self.starts.view(-1, *[1] * max(q.dim(), k.dim()))  # (B, 1, ..): one start per row
        return self._chunk(q, s) == self._chunk(k, s)

    def allowed_at(self, b: Tensor, q: Tensor, k: Tensor, length: int) -> Tensor:
        s = 0 if self.starts is None else self.starts[b]
        return self._chunk(q, s) == self._chunk(k, s)

    def _chunk(self, t: Tensor, start: Tensor | int) -> Tensor:
        """The chunk of positions t in rows whose first real token is at `start`."""
        return (t - start).div(self.chunk, rounding_mode="floor")

    def layout(self, n_blocks: int, length: int) -> Tensor:
        c = self.chunk
        return band_layout(n_blocks, self.block, -(c - 1), c - 1)


def row_starts(key_padding: Tensor | None, length: int) -> Tensor | None:
    """(B,) leading padding keys of each row, from the (B, Tk) padding factor (True: real);
    None without padding."""
    if key_padding is None or key_padding.shape[-1] != length:
        return None
    return (key_padding.long().cumsum(-1) == 0).sum(-1)


class ChunkedAttention(SparseAttention, name="chunked"):
    """chunked attention: each query sees only its own chunk of `chunk` tokens (Llama 4)"""

    class Config(SparseAttention.Config):
        chunk: int = param(
            8192, "tokens per chunk, counted from each row's first real token", min=1
        )
        block: int | None = param(
            None, "query/key block of the blocked path (null: chunk, 16 to 256)", min=1
        )

    def make_pattern(
        self, length: int, device: Any = None, ctx: AttentionContext | None = None
    ) -> SparsePattern:
        c = self.cfg.chunk
        starts = None if ctx is None else row_starts(ctx.mask.key_padding, length)
        return ChunkPattern(c, self.cfg.block or max(min(c, 256), 16), starts)
