"""Dense attention under a boolean keep mask, for the pieces a kernel or a component
computes on its own (a sparse pattern's global rows, a sliding window's decoding step): the
`math` kernel for soft-capped scores, else `sdpa` (sinks as its zero key). A query with no
allowed key gets zeros."""

from __future__ import annotations

from torch import Tensor

from archzoo.parts.kernels import Scoring
from archzoo.parts.masks import AttentionMask

from .math import math
from .sdpa import sdpa


def mask_sdpa(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: AttentionMask,
    *,
    scale: float | None,
    dropout_p: float,
    sinks: Tensor | None = None,
    softcap: float | None = None,
) -> Tensor:
    """Attention under a mask's dense materialisation: q (B, H, Tq, hd), k/v (B, Hkv, Tk, hd)
    -> (B, H, Tq, hd); per-head `sinks` (H,), soft-capped scores on the explicit path."""
    scoring = Scoring(scale=scale, softcap=softcap, sinks=sinks, dropout=dropout_p)
    return dense(q, k, v, mask, scoring)[0]


def dense(
    q: Tensor, k: Tensor, v: Tensor, mask: AttentionMask, scoring: Scoring
) -> tuple[Tensor, Tensor | None]:
    """The dense masked computation: `math` for soft-capped scores, else `sdpa`."""
    return (math if scoring.softcap is not None else sdpa)(q, k, v, mask, scoring)


def masked_sdpa(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    keep: Tensor,
    *,
    scale: float | None,
    dropout_p: float = 0.0,
    sinks: Tensor | None = None,
    softcap: float | None = None,
) -> Tensor:
    """Attention under a bool keep mask (B, 1, Tq, Tk); a query with no allowed key gets zeros."""
    mask = AttentionMask.from_keep(keep)
    return mask_sdpa(q, k, v, mask, scale=scale, dropout_p=dropout_p, sinks=sinks, softcap=softcap)
