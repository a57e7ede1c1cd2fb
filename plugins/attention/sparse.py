"""Sparse attention: patterns as predicates plus block layouts, and three ways to run them.

A `SparsePattern` says which key each query may attend to, as a vectorised predicate over
absolute positions, and covers it with a block layout (which key blocks a query block
needs). The same pattern runs through:

- `dense_attention`: materialise the (Tq, Tk) predicate with causal and padding masks and
  call SDPA: O(n^2), the reference every other path is tested against;
- `blocked_attention`: per query block, gather only the key blocks of its layout row and
  call SDPA on the small batch: time and memory O(n * w) (eager CPU/GPU);
- `flex_attention`: a FlexAttention block mask built from the predicate (under
  torch.compile, or on CUDA where FlexAttention is available).

Query rows that attend everywhere (global tokens) are computed densely on their own, so
they never widen the blocked layout. Rows with no allowed key give zeros, never NaN.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import Tensor

from archzoo.component import Capabilities, param
from archzoo.interfaces import AttentionContext
from archzoo.masks import AttentionMask

from .mha import MultiHeadAttention

try:  # FlexAttention is optional: CPU eager never depends on it
    from torch.nn.attention.flex_attention import create_block_mask
    from torch.nn.attention.flex_attention import flex_attention as _flex_attention
except ImportError:  # pragma: no cover - old torch
    create_block_mask = None
    _flex_attention = None


class SparsePattern:
    """Which keys each query may attend to (before causal and padding masks are applied)."""

    block: int = 64  # size of the query/key blocks of the layout

    def allowed(self, q: Tensor, k: Tensor, length: int) -> Tensor:
        """Bool, True where query position q may see key position k (broadcast; may add a
        leading batch dim). `length` is the number of keys in the sequence."""
        raise NotImplementedError

    def allowed_at(self, b: Tensor, q: Tensor, k: Tensor, length: int) -> Tensor:
        """The predicate at one (batch, query, key) triple (FlexAttention's mask_mod)."""
        return self.allowed(q, k, length)

    def layout(self, n_blocks: int, length: int) -> Tensor:
        """Bool (nb, nb): key blocks each query block needs. It must cover every allowed
        pair whose query is not a global query; it may cover more."""
        raise NotImplementedError

    def global_queries(self, length: int, device: torch.device) -> Tensor | None:
        """Queries that attend to every key, computed densely on their own: (G,) or (B, G)
        positions with -1 for none, or None. `layout` need not cover their rows."""
        return None


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


def mask_factors(mask: AttentionMask, q_len: int, k_len: int) -> tuple[bool, Tensor | None]:
    """(causal, key_padding (B, Tk) bool or None) of a stack's self-attention mask.

    `AttentionMask` keeps causal & padding as one (B, 1, Tq, Tk) tensor when padding is
    present; both factors are recovered from it (queries are the last Tq of Tk keys).
    """
    if mask.keep is None:
        return mask.is_causal, None
    if mask.causal is not None:  # built by AttentionMask.build: the factors are known
        return mask.causal, mask.key_padding
    keep = mask.keep[:, 0]  # (B, Tq, Tk)
    seen = keep if mask.empty_rows is None else keep & ~mask.empty_rows[:, 0]
    key_padding = seen.any(dim=1)  # a real key is seen at least by itself (or by everyone)
    offset = k_len - q_len
    q = torch.arange(q_len, device=keep.device)[:, None] + offset
    future = torch.arange(k_len, device=keep.device)[None, :] > q
    causal = not bool((seen & future).any())
    return causal, key_padding


def masked_sdpa(
    q: Tensor, k: Tensor, v: Tensor, keep: Tensor, *, scale: float | None, dropout_p: float = 0.0
) -> Tensor:
    """SDPA under a bool keep mask (B, 1, Tq, Tk); a query with no allowed key gets zeros."""
    mask = AttentionMask.from_keep(keep)  # opens empty rows so the softmax stays finite
    out = F.scaled_dot_product_attention(
        q,
        k,
        v,
        attn_mask=mask.keep,
        dropout_p=dropout_p,
        scale=scale,
        enable_gqa=q.shape[1] != k.shape[1],
    )
    return mask.zero_empty_rows(out)


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
    q = torch.arange(k_len - q_len, k_len, device=device)[:, None]
    k = torch.arange(k_len, device=device)[None, :]
    keep = pattern.allowed(q, k, k_len)
    if causal:
        keep = keep & (k <= q)
    if key_padding is not None:
        keep = keep & key_padding[:, None, :]
    if keep.dim() == 2:
        keep = keep[None]
    return keep


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


# ---------------------------------------------------------------- execution paths


def dense_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    pattern: SparsePattern,
    *,
    causal: bool,
    key_padding: Tensor | None = None,
    scale: float | None = None,
    dropout_p: float = 0.0,
) -> Tensor:
    """Reference: the full masked computation. q (B, H, Tq, hd), k/v (B, Hkv, Tk, hd)."""
    keep = pattern_keep(
        pattern, q.shape[2], k.shape[2], causal=causal, key_padding=key_padding, device=q.device
    )
    return masked_sdpa(q, k, v, keep[:, None], scale=scale, dropout_p=dropout_p)  # (B, 1, Tq, Tk)


def _rows_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    rows: Tensor,
    *,
    causal: bool,
    key_padding: Tensor | None,
    scale: float | None,
    dropout_p: float,
) -> Tensor:
    """Global query rows (B, G) (-1: none), which see every key: (B, H, G, hd)."""
    B, H, T, hd = q.shape
    valid = rows >= 0  # (B, G)
    idx = rows.clamp(min=0)
    q_rows = q.gather(2, idx[:, None, :, None].expand(B, H, -1, hd))  # (B, H, G, hd)
    kpos = torch.arange(T, device=q.device)
    keep = valid[:, :, None].expand(B, -1, T)  # global rows see every key
    if causal:
        keep = keep & (kpos[None, None, :] <= idx[:, :, None])
    if key_padding is not None:
        keep = keep & key_padding[:, None, :]
    return masked_sdpa(
        q_rows, k, v, keep[:, None], scale=scale, dropout_p=dropout_p
    )  # (B, 1, G, T)


def blocked_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    pattern: SparsePattern,
    *,
    causal: bool,
    key_padding: Tensor | None = None,
    scale: float | None = None,
    dropout_p: float = 0.0,
    global_qkv: tuple[Tensor, Tensor, Tensor] | None = None,
) -> Tensor:
    """Block-gathered attention in O(n * w): each query block sees only its layout's key blocks.

    q (B, H, T, hd), k/v (B, Hkv, T, hd) -> (B, H, T, hd). `global_qkv` replaces q, k, v for
    the global query rows (Longformer's separate global projections).
    """
    B, H, T, hd = q.shape
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
    keep = keep & kmask
    keep = keep if keep.dim() == 4 else keep[None]
    keep = keep.expand(B, nb, bs, K * bs).reshape(B * nb, 1, bs, K * bs)
    out = masked_sdpa(qb, kg, vg, keep, scale=scale, dropout_p=dropout_p)  # (B*nb, H, bs, hd)
    out = out.transpose(1, 2).reshape(B, Tp, H, hd)[:, :T]  # (B, T, H, hd)
    out = out.transpose(1, 2)  # (B, H, T, hd)

    if rows is None or rows.numel() == 0:
        return out
    gq, gk, gv = global_qkv if global_qkv is not None else (q, k, v)
    g_out = _rows_attention(
        gq,
        gk,
        gv,
        rows,
        causal=causal,
        key_padding=key_padding,
        scale=scale,
        dropout_p=dropout_p,
    )  # (B, H, G, hd)
    b_idx, g_idx = (rows >= 0).nonzero(as_tuple=True)
    out = out.transpose(1, 2)  # (B, T, H, hd)
    out = out.index_put((b_idx, rows[b_idx, g_idx]), g_out.transpose(1, 2)[b_idx, g_idx])
    return out.transpose(1, 2)


_compiled_flex: Any = None


def flex_available() -> bool:
    return _flex_attention is not None


def flex_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    pattern: SparsePattern,
    *,
    causal: bool,
    key_padding: Tensor | None = None,
    scale: float | None = None,
) -> Tensor:
    """FlexAttention with a block mask from the pattern's predicate (no dropout)."""
    global _compiled_flex
    if _flex_attention is None:
        raise RuntimeError("FlexAttention is not available in this version of torch")
    B, H, Tq, _ = q.shape
    Tk = k.shape[2]
    offset = Tk - Tq

    def mask_mod(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        qi = q_idx + offset
        ok = pattern.allowed_at(b, qi, kv_idx, Tk)
        if causal:
            ok = ok & (kv_idx <= qi)
        if key_padding is not None:
            ok = ok & key_padding[b, kv_idx]
        return ok

    mask_b = B if key_padding is not None or _per_batch(pattern) else None
    block_mask = create_block_mask(mask_mod, mask_b, None, Tq, Tk, device=q.device)
    run = _flex_attention
    if not torch.compiler.is_compiling() and q.device.type == "cuda":
        if _compiled_flex is None:
            _compiled_flex = torch.compile(_flex_attention, dynamic=False)
        run = _compiled_flex
    return run(q, k, v, block_mask=block_mask, scale=scale, enable_gqa=H != k.shape[1])


def _per_batch(pattern: SparsePattern) -> bool:
    return getattr(pattern, "per_batch", False)


def sparse_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    pattern: SparsePattern,
    *,
    causal: bool,
    key_padding: Tensor | None = None,
    scale: float | None = None,
    dropout_p: float = 0.0,
    impl: str = "auto",
    global_qkv: tuple[Tensor, Tensor, Tensor] | None = None,
) -> Tensor:
    """Run a pattern by the chosen path; 'auto' picks flex (compiled/CUDA), else blocked."""
    same_len = q.shape[2] == k.shape[2]
    if impl == "auto":
        use_flex = (
            flex_available()
            and (torch.compiler.is_compiling() or q.device.type == "cuda")
            and dropout_p == 0.0
            and global_qkv is None
        )
        impl = "flex" if use_flex else ("blocked" if same_len else "dense")
    kw: dict[str, Any] = {"causal": causal, "key_padding": key_padding, "scale": scale}
    if impl == "flex":
        return flex_attention(q, k, v, pattern, **kw)
    if impl == "blocked" and same_len:
        return blocked_attention(q, k, v, pattern, dropout_p=dropout_p, global_qkv=global_qkv, **kw)
    if global_qkv is not None:
        raise ValueError("separate global projections need the blocked path (no KV cache)")
    return dense_attention(q, k, v, pattern, dropout_p=dropout_p, **kw)


# ---------------------------------------------------------------- the component base


class SparseAttention(MultiHeadAttention):
    """Base of sparse components: mha's projections, a pattern, and the paths above.

    Subclasses define `Config` (extending this one) and `make_pattern`.
    """

    capabilities = Capabilities(cross=False, kv_cache=True, accepts_bias=False)

    @dataclass
    class Config(MultiHeadAttention.Config):
        impl: Literal["auto", "blocked", "dense", "flex"] = param(
            "auto", "execution: auto (flex when compiled/CUDA, else blocked), blocked, dense, flex"
        )

    def make_pattern(self, length: int, device: Any = None) -> SparsePattern:
        """The pattern for a sequence of `length` keys."""
        raise NotImplementedError

    def keep_mask(self, length: int, *, causal: bool) -> Tensor:
        """Bool (length, length): the pattern, and the causal triangle when `causal`."""
        pattern = self.make_pattern(length, torch.device("cpu"))
        return pattern_keep(pattern, length, length, causal=causal, key_padding=None)[0]

    def cache_layout(self) -> tuple[int, int, int | None]:
        return self.n_kv, self.head_dim, None  # every key cached; the pattern masks them

    def keys_per_query(self, context: int, causal: bool) -> float:
        """The pattern's real key count: the last query's (causal) or the mean per query."""
        return pattern_key_count(self.make_pattern(context, "cpu"), context, causal=causal)

    def forward(self, x: Tensor, ctx: AttentionContext, memory: Tensor | None = None) -> Tensor:
        if memory is not None:
            raise ValueError(f"attention {self.name!r} is self-attention only")
        q, k, v = self.project(x, ctx, None)  # (B, H, Tq, hd), (B, Hkv, Tk, hd)
        return self._attend(q, k, v, ctx)

    def record_pattern_probs(
        self,
        ctx: AttentionContext,
        q: Tensor,
        k: Tensor,
        pattern: SparsePattern,
        causal: bool,
        key_padding: Tensor | None,
    ) -> None:
        """When asked: the pattern's probabilities in the dense shape (dense reference mask)."""
        if ctx.want_probs:
            Tq, Tk = q.shape[2], k.shape[2]
            keep = pattern_keep(
                pattern, Tq, Tk, causal=causal, key_padding=key_padding, device=q.device
            )
            scale = self.scale if self.scale is not None else self.head_dim**-0.5
            self.record_probs(ctx, q, k, scale=scale, keep=keep[:, None])  # (B, 1, Tq, Tk)

    def _attend(self, q: Tensor, k: Tensor, v: Tensor, ctx: AttentionContext) -> Tensor:
        """The pattern's attention and the output projection: (B, Tq, d_model)."""
        B, _, Tq, _ = q.shape
        causal, key_padding = mask_factors(ctx.mask, Tq, k.shape[2])
        pattern = self.make_pattern(k.shape[2], q.device)
        self.record_pattern_probs(ctx, q, k, pattern, causal, key_padding)
        out = sparse_attention(
            q,
            k,
            v,
            pattern,
            causal=causal,
            key_padding=key_padding,
            scale=self.scale,
            dropout_p=self.dropout if self.training else 0.0,
            impl=self.cfg.impl,
        )
        out = out.transpose(1, 2).reshape(B, Tq, self.q_dim)  # (B, Tq, H*hd)
        return self.out(out)
