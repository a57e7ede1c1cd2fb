"""Layers that change the length of a stack's residual stream, and where its positions stand.

A layer's attention may declare a `StreamStep` (`Attention.stream_step`): before the layer
the stack halves the stream by pooling pairs of positions (Funnel Transformer's pooling
between blocks), or repeats it back to the stack's input length and adds the stream kept
after an earlier layer (Funnel's decoder). The stack hands the layer a `StreamState`: which
input position each query and key stands for and how many poolings came before them, so an
attention that reads positions or token types (relative attention) reads the pooled ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor


@dataclass(frozen=True)
class StreamStep:
    """What the stack does to the residual stream before one layer.

    pool: halve the stream ('mean' or 'max' of each pair of positions; a lone last position
        stays as it is), or None. The layer's queries (and its residual) are the pooled stream,
        its keys the stream before pooling unless `pool_keys`.
    separate_first: the first position (a [CLS] token) is kept out of the pairs: it stays
        first and the pairs start at the second position.
    truncate: with separate_first, the last position is dropped before the pairs are made.
    upsample_from: repeat the stream back to the stack's input length (each position
        2 ** poolings times; the first kept apart with separate_first) and add the stream as
        it was after layer `upsample_from`, or None.
    """

    pool: Literal["mean", "max"] | None = None
    pool_keys: bool = False
    separate_first: bool = False
    truncate: bool = False
    upsample_from: int | None = None


@dataclass
class StreamState:
    """The geometry of one layer's queries and keys on a stream that pooling shortened.

    query_index (Tq,), key_index (Tk,): the input position each query / key stands for (the
    first of the positions it pooled); query_level, key_level: the poolings scheduled before
    them (a level-n position spans 2 ** n input positions). keys: (B, Tk, D) the stream the
    keys are projected from when it is not the queries' (the stream before pooling), else
    None. token_type_ids: the stack's (B, T) segment ids at input positions, or None.
    """

    query_index: Tensor
    key_index: Tensor
    query_level: int
    key_level: int
    separate_first: bool
    keys: Tensor | None = None
    token_type_ids: Tensor | None = None

    def positions(self, index: Tensor, level: int) -> Tensor:
        """Float positions of a (T,) index at `level`: the input positions, but with
        separate_first the first one sits a level stride before the second (1 - 2 ** level),
        so the pooled positions stay evenly spaced."""
        pos = index.to(torch.float32)
        if self.separate_first and level > 0:
            pos = torch.cat([pos.new_tensor([1.0 - 2.0**level]), pos[1:]])
        return pos


def pair_pool(x: Tensor, mode: str, separate_first: bool, truncate: bool) -> Tensor:
    """(B, T, ...) -> (B, ceil(T' / 2), ...): the mean, max or min of each pair of positions
    along dim 1, a lone last position kept as it is. With separate_first the first position
    is put before the sequence (minus its last position when `truncate`) so it pools alone."""
    if separate_first:
        rest = x[:, :-1] if truncate else x
        x = torch.cat([x[:, :1], rest], dim=1)  # (B, T', ...)
    n = x.shape[1]
    even = n - n % 2
    pairs = x[:, :even].unflatten(1, (even // 2, 2))  # (B, T' // 2, 2, ...)
    if mode == "mean":
        pooled = pairs.mean(dim=2)
    elif mode == "max":
        pooled = pairs.amax(dim=2)
    elif mode == "min":
        pooled = pairs.amin(dim=2)
    else:
        raise ValueError(f"pair_pool: unknown mode {mode!r} (mean, max or min)")
    if n % 2:
        pooled = torch.cat([pooled, x[:, even:]], dim=1)  # the lone last position
    return pooled


def pool_index(index: Tensor, separate_first: bool, truncate: bool) -> Tensor:
    """(T,) -> the input position each pooled position stands for: the first of its pair."""
    if separate_first:
        rest = index[:-1] if truncate else index
        index = torch.cat([index[:1], rest])
    return index[::2]


def upsample(x: Tensor, stride: int, length: int, separate_first: bool, truncate: bool) -> Tensor:
    """(B, T', D) -> (B, length, D): each position repeated `stride` times (the first kept
    apart with separate_first), cut to `length` (padded by stride - 1 first when truncate)."""
    if stride == 1:
        return x
    if not separate_first:
        return torch.repeat_interleave(x, stride, dim=1)[:, :length]
    out = torch.repeat_interleave(x[:, 1:], stride, dim=1)  # (B, (T' - 1) * stride, D)
    if truncate:
        out = torch.nn.functional.pad(out, (0, 0, 0, stride - 1))
    return torch.cat([x[:, :1], out[:, : length - 1]], dim=1)
