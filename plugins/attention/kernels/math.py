"""Attention written out with its probabilities: soft-capped scores and value terms.

softmax(cap(q k^T * scale + bias)) over the kept keys, upcast to float32 for the softmax
(softcap.py), dropped out, times the values, plus a position's value term (Shaw's a^V) from
those probabilities. The (B, H, Tq, Tk) scores are materialised: the kernel every call can
fall back to, and the one for terms SDPA has no slot for.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor

from archzoo.parts.kernels import Scoring, attention_kernel
from archzoo.parts.masks import AttentionMask

from .softcap import capped_probs


def math_refuses(q: Tensor, k: Tensor, mask: AttentionMask, scoring: Scoring) -> str | None:
    if scoring.global_qkv is not None:
        return "separate global projections: the blocked kernel"
    return None


@attention_kernel("math", refuses=math_refuses)
def math(
    q: Tensor, k: Tensor, v: Tensor, mask: AttentionMask, scoring: Scoring
) -> tuple[Tensor, Tensor]:
    """scores, soft-cap, softmax in float32 and values written out, probabilities returned"""
    if k.shape[1] != q.shape[1]:
        k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)  # (B, H, Tk, hd)
        v = v.repeat_interleave(q.shape[1] // v.shape[1], dim=1)
    probs = capped_probs(
        q,
        k,
        mask.dense(),
        scale=scoring.scale_of(q),
        cap=scoring.softcap,
        bias=scoring.bias,
        sinks=scoring.sinks,
    )  # (B, H, Tq, Tk)
    dropped = F.dropout(probs, scoring.dropout) if scoring.dropout else probs
    out = dropped @ v  # (B, H, Tq, hd)
    if scoring.values is not None:
        out = out + scoring.values(dropped)
    return mask.zero_empty_rows(out), probs
