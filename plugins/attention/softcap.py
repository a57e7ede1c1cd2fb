"""Logit soft-capping (Gemma 2): scores pass through cap * tanh(s / cap) before the softmax.

SDPA has no hook between the scores and the softmax, so a capped attention runs either the
explicit computation here (eager, any device) or FlexAttention with `softcap_score_mod`
(CUDA or under torch.compile). The cap acts on the scaled scores plus any position bias,
before the mask: exactly where transformers' Gemma 2 applies it.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from archzoo.parts.masks import AttentionMask

from .sinks import softmax_with_sinks


def soft_cap(x: Tensor, cap: float) -> Tensor:
    """cap * tanh(x / cap): close to x for |x| << cap, never beyond +-cap."""
    return torch.tanh(x / cap) * cap


@functools.lru_cache(maxsize=64)
def softcap_score_mod(cap: float) -> Any:
    """FlexAttention's score_mod(score, b, h, q_idx, kv_idx) capping the scaled score (one
    function per cap, so a compiled kernel is reused)."""

    def score_mod(score: Tensor, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        return torch.tanh(score / cap) * cap

    return score_mod


def capped_probs(
    q: Tensor,
    k: Tensor,
    keep: Tensor | None,
    *,
    scale: float,
    cap: float | None,
    bias: Tensor | None = None,
    sinks: Tensor | None = None,
) -> Tensor:
    """softmax(cap(q k^T * scale + bias)) over the kept keys: (B, H, Tq, Tk), q's dtype.

    q (B, H, Tq, hd), k (B, Hkv, Tk, hd); `keep` is a bool (B or 1, 1, Tq, Tk) mask whose
    rows each keep at least one key (`AttentionMask.dense`), or None for all keys; `sinks`
    (H,) per-head logits that join each denominator.
    """
    if k.shape[1] != q.shape[1]:
        k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)  # (B, H, Tk, hd)
    scores = (q @ k.transpose(-1, -2)) * scale  # (B, H, Tq, Tk)
    if bias is not None:
        scores = scores + bias.to(scores.dtype)
    if cap is not None:
        scores = soft_cap(scores, cap)
    if keep is not None:
        scores = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
    if sinks is not None:
        return softmax_with_sinks(scores.float(), sinks).to(q.dtype)
    upcast = torch.promote_types(scores.dtype, torch.float32)  # fp16/bf16 in fp32, fp64 kept
    return scores.softmax(-1, dtype=upcast).to(q.dtype)


def capped_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: AttentionMask,
    *,
    scale: float | None,
    cap: float | None,
    bias: Tensor | None = None,
    sinks: Tensor | None = None,
    dropout_p: float = 0.0,
) -> Tensor:
    """Soft-capped attention under a mask, computed explicitly: (B, H, Tq, hd); a query
    with no visible key gets zeros. q (B, H, Tq, hd), k and v (B, Hkv, Tk, hd)."""
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    probs = capped_probs(q, k, mask.dense(), scale=scale, cap=cap, bias=bias, sinks=sinks)
    probs = F.dropout(probs, dropout_p) if dropout_p else probs
    if v.shape[1] != q.shape[1]:
        v = v.repeat_interleave(q.shape[1] // v.shape[1], dim=1)  # (B, H, Tk, hd)
    return mask.zero_empty_rows(probs @ v)
