"""Attention probabilities on request: computed beside the fast path, only where asked for.

SDPA and FlexAttention never materialise the probabilities. When a layer is asked for them
(`AttentionContext.want_probs`), its attention calls `Attention.record_probs`, whose default
recomputes softmax(q k^T * scale + bias) under the mask here; the layer's output still
comes from its fast path, and layers not asked keep it alone.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .masks import AttentionMask


def allowed_keys(mask: AttentionMask | None, q_len: int, k_len: int, device: torch.device):
    """Bool (B or 1, 1, Tq, Tk) of the keys each query may see, or None for all of them."""
    return None if mask is None else mask.allowed()  # empty rows stay empty (not opened)


def attention_probs(
    q: Tensor,
    k: Tensor,
    mask: AttentionMask | None,
    *,
    scale: float,
    bias: Tensor | None = None,
    keep: Tensor | None = None,
    sinks: Tensor | None = None,
    softcap: float | None = None,
) -> Tensor:
    """Probabilities (B, H, Tq, Tk) of q (B, H, Tq, hd) over k (B, Hkv, Tk, hd).

    `bias` is an additive score term (broadcast to (B, H, Tq, Tk)); `keep` a further bool
    mask (a sparse pattern); `sinks` (H,) per-head logits that join each denominator (the
    row then sums to less than 1); `softcap` caps the biased scores to cap * tanh(s / cap).
    Masked keys get exactly 0, and a query with no key a row of 0.
    """
    H, Hkv, Tq, Tk = q.shape[1], k.shape[1], q.shape[2], k.shape[2]
    if Hkv != H:
        k = k.repeat_interleave(H // Hkv, dim=1)  # (B, H, Tk, hd)
    scores = (q.float() @ k.float().transpose(-1, -2)) * scale  # (B, H, Tq, Tk)
    if bias is not None:
        scores = scores + bias.float()
    if softcap is not None:
        scores = torch.tanh(scores / softcap) * softcap
    allowed = allowed_keys(mask, Tq, Tk, q.device)
    if keep is not None:
        allowed = keep if allowed is None else allowed & keep
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))
    if sinks is None:
        probs = scores.softmax(-1)
    else:  # softmax over [scores | sink], the sink column dropped
        sink = sinks.float().view(1, -1, 1, 1).expand(*scores.shape[:-1], 1)
        probs = torch.cat([scores, sink], dim=-1).softmax(-1)[..., :-1]
    if allowed is not None:
        probs = probs.masked_fill(~allowed.any(-1, keepdim=True), 0.0)  # rows with no key
    return probs.to(q.dtype)


def scatter_keys(probs: Tensor, index: Tensor, total: int) -> Tensor:
    """Probabilities over gathered keys (B, H, Tq, S) at sequence positions `index` (S,),
    -1 for empty slots, scattered into the dense (B, H, Tq, total) shape."""
    B, H, Tq, _ = probs.shape
    dense = probs.new_zeros(B, H, Tq, total)
    ok = index >= 0
    idx = index.clamp(min=0).expand(B, H, Tq, -1)
    return dense.scatter_add(-1, idx, probs * ok)
