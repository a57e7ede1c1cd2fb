"""Sparse patterns block by block in O(n * w): each query block sees only the key blocks of
its layout row.

The pattern's block layout says which key blocks a query block needs; the keys of those
blocks are gathered once (one index_select of contiguous rows) and SDPA runs on the small
batch under the pattern's predicate. A pattern that is a band plus global tokens runs on
CPU without gathers (band.py). Query rows that attend everywhere (global tokens) are
computed densely on their own, so they never widen the blocked layout.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from archzoo.parts.kernels import Scoring, attention_kernel
from archzoo.parts.masks import AttentionMask

from .band import band_applies, band_attention
from .masked import masked_sdpa


def rows_attention(
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


def blocked_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: AttentionMask,
    global_qkv: Any,
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
        return put_global_rows(out, q, k, v, mask, rows, global_qkv, scoring)
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

    return put_global_rows(out, q, k, v, mask, rows, global_qkv, scoring)


def put_global_rows(
    out: Tensor,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: AttentionMask,
    rows: Tensor | None,
    global_qkv: Any,
    scoring: dict[str, Any],
) -> Tensor:
    """out (B, H, T, hd) with the global query rows (B, G) (-1: none) computed densely, from
    `global_qkv` when given."""
    if rows is None or rows.numel() == 0:
        return out
    if global_qkv is None:
        g_out = rows_attention(q, k, v, rows, mask, **scoring)  # (B, H, G, hd)
    else:
        g_out = global_qkv.rows_attention(rows, mask, **scoring)
    b_idx, g_idx = (rows >= 0).nonzero(as_tuple=True)
    out = out.transpose(1, 2)  # (B, T, H, hd)
    out = out.index_put((b_idx, rows[b_idx, g_idx]), g_out.transpose(1, 2)[b_idx, g_idx])
    return out.transpose(1, 2)


def blockable(q: Tensor, k: Tensor, mask: AttentionMask) -> bool:
    """Queries and keys coincide (no cache, no explicit mask): the layout covers the call."""
    return q.shape[2] == k.shape[2] and mask.q_offset == 0 and mask.explicit is None


def blocked_refuses(q: Tensor, k: Tensor, mask: AttentionMask, scoring: Scoring) -> str | None:
    if mask.pattern is None:
        return "no sparse pattern to block"
    if not blockable(q, k, mask):
        return "queries and keys differ (decoding with a cache): nothing to block"
    if scoring.bias is not None or scoring.needs_probs:
        return "a position bias or value term"
    if scoring.sinks is not None and torch.compiler.is_compiling():
        return "sinks under torch.compile: the block gathers do not trace with them"
    return None


@attention_kernel("blocked", refuses=blocked_refuses)
def blocked(
    q: Tensor, k: Tensor, v: Tensor, mask: AttentionMask, scoring: Scoring
) -> tuple[Tensor, None]:
    """a sparse pattern block by block in O(n * w) (a band plus global keys without gathers)"""
    options = {"scale": scoring.scale, "dropout_p": scoring.dropout}
    options.update(sinks=scoring.sinks, softcap=scoring.softcap)
    return blocked_attention(q, k, v, mask, scoring.global_qkv, **options), None
