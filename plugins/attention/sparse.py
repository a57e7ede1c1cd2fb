"""Sparse attention: patterns as predicates plus block layouts, and three ways to run them.

A `SparsePattern` says which key each query may attend to, as a vectorised predicate over
absolute positions, and covers it with a block layout (which key blocks a query block
needs). The same pattern runs through:

- `dense_attention`: materialise the (Tq, Tk) predicate with causal and padding masks and
  call SDPA: O(n^2), the reference every other path is tested against;
- `blocked_attention`: per query block, gather only the key blocks of its layout row and
  call SDPA on the small batch: time and memory O(n * w) (eager CPU/GPU); a pattern that is a
  band plus global tokens (`band()`, Longformer) runs on CPU without gathers (band.py);
- `flex_attention`: a FlexAttention block mask built from the predicate (under
  torch.compile, or on CUDA where FlexAttention is available).

Query rows that attend everywhere (global tokens) are computed densely on their own, so
they never widen the blocked layout. Rows with no allowed key give zeros, never NaN.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import Tensor

from archzoo.parts.component import param
from archzoo.parts.interfaces import AttentionContext
from archzoo.parts.masks import AttentionMask, Pattern

from .band import band_applies, band_attention
from .eager import eager_attention, takes_eager
from .flex import flex_available, mask_flex
from .mha import MultiHeadAttention
from .sinks import flex_lse_available, flex_with_sinks, sink_sdpa
from .softcap import capped_attention, softcap_score_mod

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
    """SDPA under a mask's dense materialisation (with per-head `sinks` (H,) when given; the
    explicit path when scores are soft-capped); a query with no allowed key gets zeros."""
    if softcap is not None:
        return capped_attention(
            q, k, v, mask, scale=scale, cap=softcap, sinks=sinks, dropout_p=dropout_p
        )
    if sinks is not None:
        out = sink_sdpa(q, k, v, mask.dense(), sinks, scale=scale, dropout_p=dropout_p)
        return mask.zero_empty_rows(out)
    out = F.scaled_dot_product_attention(
        q,
        k,
        v,
        **mask.sdpa(),
        dropout_p=dropout_p,
        scale=scale,
        enable_gqa=q.shape[1] != k.shape[1],
    )
    return mask.zero_empty_rows(out)


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
    """SDPA under a bool keep mask (B, 1, Tq, Tk); a query with no allowed key gets zeros."""
    mask = AttentionMask.from_keep(keep)
    return mask_sdpa(q, k, v, mask, scale=scale, dropout_p=dropout_p, sinks=sinks, softcap=softcap)


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
        return _rows_attention(*self.qkv(), rows, mask, **scoring)


# ---------------------------------------------------------------- execution paths


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


def flex_attention(q: Tensor, k: Tensor, v: Tensor, p: SparsePattern, **options: Any) -> Tensor:
    """FlexAttention with a block mask from the pattern's predicate (no dropout)."""
    return sparse_attention(q, k, v, p, impl="flex", **options)


def _rows_attention(
    q: Tensor, k: Tensor, v: Tensor, rows: Tensor, mask: AttentionMask, **scoring: Any
) -> Tensor:
    """Global query rows (B, G) (-1: none), which see every key the mask's causal and padding
    factors allow: (B, H, G, hd). `scoring`: masked_sdpa's options."""
    B, H, T, hd = q.shape
    valid = rows >= 0  # (B, G)
    idx = rows.clamp(min=0)
    q_rows = q.gather(2, idx[:, None, :, None].expand(B, H, -1, hd))  # (B, H, G, hd)
    kpos = torch.arange(T, device=q.device)
    keep = valid[:, :, None].expand(B, -1, T)  # global rows see every key
    if mask.causal:
        keep = keep & (kpos[None, None, :] <= idx[:, :, None])
    if mask.key_padding is not None:
        keep = keep & mask.key_padding[:, None, :]
    if mask.key_docs is not None:  # a global row sees its own document only
        keep = keep & (mask.query_docs.gather(1, idx)[:, :, None] == mask.key_docs[:, None, :])
    return masked_sdpa(q_rows, k, v, keep[:, None], **scoring)  # (B, 1, G, T)


def _blocked_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: AttentionMask,
    global_qkv: GlobalQKV | None,
    **scoring: Any,
) -> Tensor:
    """Block-gathered attention in O(n * w): each query block sees only its layout's key blocks.

    q (B, H, T, hd), k/v (B, Hkv, T, hd) -> (B, H, T, hd). `global_qkv` replaces q, k, v for
    the global query rows (Longformer's separate global projections); `scoring` (scale,
    dropout_p, per-head `sinks` (H,), softcap) goes to every block's masked_sdpa.
    """
    pattern, causal, key_padding = mask.pattern, mask.causal, mask.key_padding
    B, H, T, hd = q.shape
    if band_applies(q, k, v, mask, scoring):
        rows = pattern.global_queries(T, q.device)  # (G,) or (B, G), -1 for none
        if rows is not None:
            rows = rows if rows.dim() == 2 else rows[None].expand(B, -1)  # (B, G)
            rows = rows if rows.numel() > 0 else None
        out = band_attention(q, k, v, mask, rows, scale=scoring["scale"])
        return _put_global_rows(out, q, k, v, mask, rows, global_qkv, scoring)
    Hkv, bs = k.shape[1], pattern.block
    nb = math.ceil(T / bs)
    Tp = nb * bs
    device = q.device
    layout = pattern.layout(nb, T).to(device)
    if layout.dim() == 3:
        layout = layout.any(0)
    if causal:
        layout = layout & torch.ones(nb, nb, dtype=torch.bool, device=device).tril()
    rows = pattern.global_queries(T, device)
    if rows is not None and rows.numel() > 0:
        rows = rows if rows.dim() == 2 else rows[None].expand(B, -1)
        is_global = torch.zeros(B, Tp + 1, dtype=torch.bool, device=device)
        is_global[:, T:] = True  # padding positions need no keys
        is_global.scatter_(1, torch.where(rows >= 0, rows, Tp), True)
        all_global = is_global[:, :Tp].view(B, nb, bs).all(-1).all(0)  # (nb,)
        layout = layout & ~all_global[:, None]  # those rows come from the dense row path
    counts = layout.sum(-1)
    K = max(int(counts.max()), 1)
    order = torch.argsort((~layout).to(torch.int8), dim=-1, stable=True)[:, :K]  # (nb, K)
    slot_ok = torch.arange(K, device=device)[None, :] < counts[:, None]  # (nb, K)

    # Work in (B, T, heads, hd) memory (how the projections lay q, k, v out): a query block
    # is a view, a key block gather is one index_select of contiguous rows, and SDPA takes
    # the transposed views as they are.
    qpos = torch.arange(Tp, device=device).view(nb, bs)  # (nb, bs)
    kpos = (order[:, :, None] * bs + torch.arange(bs, device=device)).view(nb, K * bs)
    kidx = kpos.clamp(max=T - 1)
    qt = q.transpose(1, 2)  # (B, T, H, hd)
    if Tp != T:
        qt = F.pad(qt, (0, 0, 0, 0, 0, Tp - T))
    qb = qt.reshape(B * nb, bs, H, hd).transpose(1, 2)  # (B*nb, H, bs, hd)
    kg = k.transpose(1, 2).index_select(1, kidx.flatten())  # (B, nb*K*bs, Hkv, hd)
    vg = v.transpose(1, 2).index_select(1, kidx.flatten())
    kg = kg.view(B * nb, K * bs, Hkv, hd).transpose(1, 2)  # (B*nb, Hkv, K*bs, hd)
    vg = vg.view(B * nb, K * bs, Hkv, hd).transpose(1, 2)

    q_c = qpos.clamp(max=T - 1)
    keep = pattern.allowed(q_c[:, :, None], kidx[:, None, :], T)  # ([B,] nb, bs, K*bs)
    kmask = slot_ok[:, :, None].expand(nb, K, bs).reshape(nb, 1, K * bs) & (kpos < T)[:, None]
    if causal:
        kmask = kmask & (kpos[:, None, :] <= qpos[:, :, None])
    if key_padding is not None:
        kmask = kmask & key_padding[:, kidx][:, :, None, :]  # (B, nb, 1, K*bs)
    if mask.key_docs is not None:  # packed rows: keys of the query's document only
        same = mask.key_docs[:, kidx][:, :, None, :] == mask.query_docs[:, q_c][..., None]
        kmask = kmask & same  # (B, nb, bs, K*bs)
    keep = keep & kmask
    keep = keep if keep.dim() == 4 else keep[None]
    keep = keep.expand(B, nb, bs, K * bs).reshape(B * nb, 1, bs, K * bs)
    out = masked_sdpa(qb, kg, vg, keep, **scoring)  # (B*nb, H, bs, hd)
    out = out.transpose(1, 2).reshape(B, Tp, H, hd)[:, :T]  # (B, T, H, hd)
    out = out.transpose(1, 2)  # (B, H, T, hd)

    return _put_global_rows(out, q, k, v, mask, rows, global_qkv, scoring)


def _put_global_rows(
    out: Tensor,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: AttentionMask,
    rows: Tensor | None,
    global_qkv: GlobalQKV | None,
    scoring: dict[str, Any],
) -> Tensor:
    """out (B, H, T, hd) with the global query rows (B, G) (-1: none) computed densely, from
    `global_qkv` when given."""
    if rows is None or rows.numel() == 0:
        return out
    if global_qkv is None:
        g_out = _rows_attention(q, k, v, rows, mask, **scoring)  # (B, H, G, hd)
    else:
        g_out = global_qkv.rows_attention(rows, mask, **scoring)
    b_idx, g_idx = (rows >= 0).nonzero(as_tuple=True)
    out = out.transpose(1, 2)  # (B, T, H, hd)
    out = out.index_put((b_idx, rows[b_idx, g_idx]), g_out.transpose(1, 2)[b_idx, g_idx])
    return out.transpose(1, 2)


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
    """Attention under a mask that carries a pattern, by the path `impl` names ('auto': flex
    when compiled or on CUDA, else blocked when queries and keys coincide and span more than
    one block, else dense); `sinks` (H,): per-head sink logits in every softmax denominator."""
    blockable = q.shape[2] == k.shape[2] and mask.q_offset == 0 and mask.explicit is None
    # one block: blocking saves nothing (the same T x T scores, padded), and dense SDPA gives
    # transformers' bits in 16-bit floats
    worth_blocking = global_qkv is not None or k.shape[2] > getattr(mask.pattern, "block", 0)
    if impl == "auto":
        use_flex = (
            flex_available()
            and (torch.compiler.is_compiling() or q.device.type == "cuda")
            and dropout_p == 0.0
            and global_qkv is None
            and (sinks is None or flex_lse_available(q))
        )
        impl = "flex" if use_flex else ("blocked" if blockable and worth_blocking else "dense")
        if sinks is not None and not use_flex and torch.compiler.is_compiling():
            impl = "dense"  # no FlexAttention logsumexp here, and blocked is not traceable
    if impl == "flex":
        score_mod = None if softcap is None else softcap_score_mod(softcap)
        if sinks is not None:
            return flex_with_sinks(q, k, v, mask, sinks, scale=scale, score_mod=score_mod)
        return mask_flex(q, k, v, mask, scale=scale, score_mod=score_mod)
    if impl == "blocked" and blockable:
        scoring = {"scale": scale, "dropout_p": dropout_p, "sinks": sinks, "softcap": softcap}
        return _blocked_attention(q, k, v, mask, global_qkv, **scoring)
    if global_qkv is not None:
        raise ValueError("separate global projections need the blocked path (no KV cache)")
    return mask_sdpa(q, k, v, mask, scale=scale, dropout_p=dropout_p, sinks=sinks, softcap=softcap)


# ---------------------------------------------------------------- the component base


class SparseAttention(MultiHeadAttention, cross=False, accepts_bias=False):
    """Base of sparse components: mha's projections, a pattern, and the paths above.

    Subclasses define `Config` (extending this one) and `make_pattern`.
    """

    class Config(MultiHeadAttention.Config):
        impl: Literal["auto", "blocked", "dense", "flex"] = param(
            "auto", "execution: auto (flex when compiled/CUDA, else blocked), blocked, dense, flex"
        )

    @classmethod
    def check(cls, cfg: Any, dims: Any) -> list[tuple[str, str]]:
        issues = super().check(cfg, dims)
        if cfg.eager and getattr(cfg, "global_projections", False):
            issues.append(("eager", "has no path for separate global projections"))
        return issues

    def make_pattern(
        self, length: int, device: Any = None, ctx: AttentionContext | None = None
    ) -> SparsePattern:
        """The pattern for a sequence of `length` keys (per-batch inputs come from `ctx`)."""
        raise NotImplementedError

    def keep_mask(self, length: int, *, causal: bool) -> Tensor:
        """Bool (length, length): the pattern, and the causal triangle when `causal`."""
        pattern = self.make_pattern(length, torch.device("cpu"))
        return pattern_keep(pattern, length, length, causal=causal, key_padding=None)[0]

    def cache_layout(self) -> tuple[int, int, int | None]:
        return self.n_kv, self.head_dim, None  # every key cached; the pattern masks them

    def keys_per_query(self, context: int, causal: bool) -> float:
        """The pattern's real key count: the last query's (causal) or the mean per query."""
        pattern = self.make_pattern(context, torch.device("cpu"))
        return pattern_key_count(pattern, context, causal=causal)

    def global_qkv(self, x: Tensor, pattern: SparsePattern | None = None) -> GlobalQKV | None:
        """Separate q, k, v for the global query rows of `pattern` (Longformer), or None."""
        return None

    def forward(self, x: Tensor, ctx: AttentionContext, memory: Tensor | None = None) -> Tensor:
        if memory is not None:
            raise ValueError(f"attention {self.name!r} is self-attention only")
        q, k, v = self.project(x, ctx, None)  # (B, H, Tq, hd), (B, Hkv, Tk, hd)
        return self._attend(q, k, v, ctx, x)

    def record_pattern_probs(
        self,
        ctx: AttentionContext,
        q: Tensor,
        k: Tensor,
        mask: AttentionMask,
        global_qkv: GlobalQKV | None = None,
    ) -> None:
        """When asked: the pattern's probabilities in the dense shape (dense reference mask);
        global rows computed from `global_qkv` (Longformer) take their q and k from there."""
        if not ctx.want_probs:
            return
        scale = self.scale if self.scale is not None else self.head_dim**-0.5
        self.record_probs(
            ctx, q, k, scale=scale, keep=mask.allowed(), sinks=self.sinks, softcap=self.cfg.softcap
        )  # (B, H, Tq, Tk)
        if global_qkv is None:
            return
        local = ctx.probs
        gq, gk, _ = global_qkv.qkv()
        self.record_probs(
            ctx,
            gq,
            gk,
            scale=scale,
            keep=mask.allowed(),
            sinks=self.sinks,
            softcap=self.cfg.softcap,
        )
        T = k.shape[2]
        rows = mask.pattern.global_queries(T, q.device)  # (G,) or (B, G), -1 for none
        if rows is None:
            ctx.probs = local
            return
        rows = rows if rows.dim() == 2 else rows[None]
        flags = torch.zeros(rows.shape[0], T + 1, dtype=torch.bool, device=q.device)
        flags.scatter_(1, torch.where(rows >= 0, rows, T), True)  # (B|1, T + 1)
        ctx.probs = torch.where(flags[:, None, T - q.shape[2] : T, None], ctx.probs, local)

    def _attend(
        self, q: Tensor, k: Tensor, v: Tensor, ctx: AttentionContext, x: Tensor | None = None
    ) -> Tensor:
        """The pattern's attention and the output projection: (B, Tq, d_model)."""
        B, _, Tq, _ = q.shape
        mask = ctx.mask.with_pattern(self.make_pattern(k.shape[2], q.device, ctx))
        global_qkv = None if x is None else self.global_qkv(x, mask.pattern)
        if takes_eager(self.cfg.eager, q):  # the dense masked computation, transformers' order
            scale = self.scale if self.scale is not None else self.head_dim**-0.5
            out, probs = eager_attention(
                q,
                k,
                v,
                mask.dense(),
                scale=scale,
                sinks=self.sinks,
                dropout_p=self.dropout if self.training else 0.0,
            )  # (B, H, Tq, hd)
            self.record_probs(ctx, q, k, scale=scale, probs=probs)
            out = mask.zero_empty_rows(out).transpose(1, 2).reshape(B, Tq, self.q_dim)
            return self.out(out)
        self.record_pattern_probs(ctx, q, k, mask, global_qkv)
        out = attend(
            q,
            k,
            v,
            mask,
            scale=self.scale,
            dropout_p=self.dropout if self.training else 0.0,
            impl="blocked" if global_qkv is not None else self.cfg.impl,
            global_qkv=global_qkv,
            sinks=self.sinks,
            softcap=self.cfg.softcap,
        )
        out = out.transpose(1, 2).reshape(B, Tq, self.q_dim)  # (B, Tq, H*hd)
        return self.out(out)
