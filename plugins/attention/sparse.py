"""Sparse attention: patterns as predicates plus block layouts, run by the kernels.

A `SparsePattern` says which key each query may attend to, as a vectorised predicate over
absolute positions, and covers it with a block layout (which key blocks a query block
needs). The mask carries the pattern to the layer's kernel (kernels/): `blocked` runs it
block by block in O(n * w), `flex` as a FlexAttention block mask, `sdpa` and `math` under
its dense (Tq, Tk) materialisation, the reference every other path is tested against.
Rows with no allowed key give zeros, never NaN.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from archzoo.parts.attention_template import AttentionTemplate
from archzoo.parts.interfaces import Attention, AttentionContext, NormFactory
from archzoo.parts.kernels import AttentionKernel, Scoring, dispatch
from archzoo.parts.masks import AttentionMask, Pattern

from .kernels.auto import auto
from .kernels.blocked import blocked, rows_attention
from .kernels.flex import flex
from .kernels.masked import dense
from .mha import MultiHeadAttention
from .projections import ProjectionConfig, Projections, projection_issues

SparsePattern = Pattern  # the predicate + block layout a mask carries (archzoo.parts.masks)


# ---------------------------------------------------------------- layout helpers


def block_differences(n_blocks: int, block: int, device: Any = None) -> tuple[Tensor, Tensor]:
    """Smallest and largest q - k over each (query block, key block) pair: two (nb, nb)."""
    i = torch.arange(n_blocks, device=device)
    d = (i[:, None] - i[None, :]) * block
    return d - (block - 1), d + (block - 1)


def band_layout(n_blocks: int, block: int, lo: int, hi: int, device: Any = None) -> Tensor:
    """Blocks holding some pair with lo <= q - k <= hi."""
    dmin, dmax = block_differences(n_blocks, block, device)
    return (dmax >= lo) & (dmin <= hi)


def key_block_any(keys: Tensor, n_blocks: int, block: int) -> Tensor:
    """(nb,) True for key blocks holding any True of a (length,) per-key flag."""
    pad = n_blocks * block - keys.shape[-1]
    return F.pad(keys, (0, pad)).view(*keys.shape[:-1], n_blocks, block).any(-1)


# ---------------------------------------------------------------- masks


def pattern_mask(
    pattern: SparsePattern, q: Tensor, k: Tensor, *, causal: bool, key_padding: Tensor | None
) -> AttentionMask:
    """The mask of a pattern with causal and padding factors, for q (.., Tq, hd), k (.., Tk, hd)."""
    Tq, Tk = q.shape[2], k.shape[2]
    return AttentionMask(
        Tq, Tk, causal=causal, key_padding=key_padding, pattern=pattern, device=q.device
    )


def pattern_keep(
    pattern: SparsePattern,
    q_len: int,
    k_len: int,
    *,
    causal: bool,
    key_padding: Tensor | None,
    device: Any = None,
) -> Tensor:
    """The dense (B or 1, Tq, Tk) bool mask: pattern & causal & padding (queries last)."""
    mask = AttentionMask(
        q_len, k_len, causal=causal, key_padding=key_padding, pattern=pattern, device=device
    )
    return mask.allowed()[:, 0]


def pattern_key_count(pattern: SparsePattern, length: int, *, causal: bool) -> float:
    """Keys the last query sees (causal) or the mean keys per query, rows taken in chunks."""
    k = torch.arange(length)[None, :]
    if causal:
        q = torch.tensor([[length - 1]])
        return float((pattern.allowed(q, k, length) & (k <= q)).sum())
    total, chunk = 0, max(1, 2**22 // length)
    for start in range(0, length, chunk):
        q = torch.arange(start, min(start + chunk, length))[:, None]
        total += int(pattern.allowed(q, k, length).expand(len(q), length).sum())
    return total / length


class GlobalQKV:
    """Separate q, k, v for the global query rows (Longformer's global projections)."""

    def qkv(self) -> tuple[Tensor, Tensor, Tensor]:
        """q (B, H, T, hd) (needed at the global rows only), k and v (B, Hkv, T, hd)."""
        raise NotImplementedError

    def rows_attention(self, rows: Tensor, mask: AttentionMask, **scoring: Any) -> Tensor:
        """(B, H, G, hd): the global rows (B, G) (-1: none) over every key the mask allows."""
        return rows_attention(*self.qkv(), rows, mask, **scoring)


# the paths of `attend` by their names here ("dense": sdpa, or math for soft-capped scores)
PATHS = {
    "auto": auto,
    "blocked": blocked,
    "dense": AttentionKernel("dense", dense, lambda *call: None, "sdpa or math", __name__),
    "flex": flex,
}


def attend(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: AttentionMask,
    *,
    scale: float | None = None,
    dropout_p: float = 0.0,
    impl: str = "auto",
    global_qkv: GlobalQKV | None = None,
    sinks: Tensor | None = None,
    softcap: float | None = None,
) -> Tensor:
    """Attention under a mask that carries a pattern, by the kernel `impl` names (auto,
    blocked, dense, flex; one that cannot serve the call hands it to auto); `sinks` (H,):
    per-head sink logits in every softmax denominator."""
    scoring = Scoring(
        scale=scale, dropout=dropout_p, sinks=sinks, softcap=softcap, global_qkv=global_qkv
    )
    return dispatch(PATHS[impl], q, k, v, mask, scoring, lambda: auto)[0]


def sparse_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    pattern: SparsePattern,
    *,
    causal: bool,
    key_padding: Tensor | None = None,
    **options: Any,
) -> Tensor:
    """A pattern under causal and padding factors, run by `attend` (its `impl`, `scale`,
    `dropout_p`, `global_qkv`, `sinks`, `softcap` options). q (B, H, Tq, hd), k/v (B, Hkv,
    Tk, hd) -> (B, H, Tq, hd)."""
    mask = pattern_mask(pattern, q, k, causal=causal, key_padding=key_padding)
    return attend(q, k, v, mask, **options)


def dense_attention(q: Tensor, k: Tensor, v: Tensor, p: SparsePattern, **options: Any) -> Tensor:
    """Reference: the full masked computation (`sparse_attention` on the dense path)."""
    return sparse_attention(q, k, v, p, impl="dense", **options)


def blocked_attention(q: Tensor, k: Tensor, v: Tensor, p: SparsePattern, **options: Any) -> Tensor:
    """Block-gathered attention in O(n * w) (`sparse_attention` on the blocked path)."""
    return sparse_attention(q, k, v, p, impl="blocked", **options)


def flex_pattern_attention(
    q: Tensor, k: Tensor, v: Tensor, p: SparsePattern, **options: Any
) -> Tensor:
    """FlexAttention with a block mask from the pattern's predicate (no dropout)."""
    return sparse_attention(q, k, v, p, impl="flex", **options)


# ---------------------------------------------------------------- the component base


class SparseAttention(
    Projections, AttentionTemplate, cross=False, kv_cache=True, mup=True, accepts_bias=False
):
    """Base of sparse components: the shared projections and a pattern, on the template.

    Subclasses define `Config` (extending this one) and `make_pattern`.
    """

    class Config(ProjectionConfig):
        pass

    def __init__(
        self, cfg: Any, dims: Any, *, cross: bool = False, make_norm: NormFactory | None = None
    ) -> None:
        super().__init__(cfg, dims)
        self.build_projections(cfg, dims, cross=cross, make_norm=make_norm)

    @classmethod
    def check(cls, cfg: Any, dims: Any) -> list[tuple[str, str]]:
        return projection_issues(cfg, dims)

    @classmethod
    def cross_attention(cls, cfg: Any, dims: Any, **parts: Any) -> Attention:
        """Dense `mha` with this layer's projection settings."""
        return MultiHeadAttention.cross_attention(cfg, dims, **parts)

    def make_pattern(
        self, length: int, device: Any = None, ctx: AttentionContext | None = None
    ) -> SparsePattern:
        """The pattern for a sequence of `length` keys (per-batch inputs come from `ctx`)."""
        raise NotImplementedError

    def pattern(self, length: int, device: Any, ctx: AttentionContext) -> SparsePattern:
        return self.make_pattern(length, device, ctx)

    def keep_mask(self, length: int, *, causal: bool) -> Tensor:
        """Bool (length, length): the pattern, and the causal triangle when `causal`."""
        pattern = self.make_pattern(length, torch.device("cpu"))
        return pattern_keep(pattern, length, length, causal=causal, key_padding=None)[0]

    def keys_per_query(self, context: int, causal: bool) -> float:
        """The pattern's real key count: the last query's (causal) or the mean per query."""
        pattern = self.make_pattern(context, torch.device("cpu"))
        return pattern_key_count(pattern, context, causal=causal)

    def attend(
        self, x: Tensor, ctx: AttentionContext, memory: Tensor | None = None
    ) -> tuple[Tensor, Tensor | None]:
        if memory is not None:
            raise ValueError(f"attention {self.name!r} is self-attention only")
        return super().attend(x, ctx, None)

    def probabilities(self, q: Tensor, k: Tensor, mask: AttentionMask, scoring: Scoring) -> Tensor:
        """The pattern's probabilities in the dense shape; global rows computed from separate
        projections (Longformer) take their q and k from there."""
        local = super().probabilities(q, k, mask, scoring)  # (B, H, Tq, Tk)
        if scoring.global_qkv is None:
            return local
        gq, gk, _ = scoring.global_qkv.qkv()
        glob = super().probabilities(gq, gk, mask, scoring)
        T = k.shape[2]
        rows = mask.pattern.global_queries(T, q.device)  # (G,) or (B, G), -1 for none
        if rows is None:
            return local
        rows = rows if rows.dim() == 2 else rows[None]
        flags = torch.zeros(rows.shape[0], T + 1, dtype=torch.bool, device=q.device)
        flags.scatter_(1, torch.where(rows >= 0, rows, T), True)  # (B|1, T + 1)
        return torch.where(flags[:, None, T - q.shape[2] : T, None], glob, local)
