"""Attention op by op, as transformers' eager attention functions write it.

In 16-bit floats every op rounds, so a family whose transformers code attends eagerly (no
SDPA: GPT-1, MPT, BLOOM, XLM, BigBird, LongT5, GPT-OSS) gets its bits only from the same
ops in the same order and dtype: scores q @ k^T rounded, times the scale, plus the bias
(BLOOM: both in one baddbmm), masked, the softmax (with sinks: the row's maximum subtracted
first), probabilities @ values. SDPA's kernels never round the scores and give other last
bits. The (B, H, Tq, Tk) scores are materialised: only converters that need the bits ask.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from archzoo.parts.kernels import Scoring, attention_kernel
from archzoo.parts.masks import AttentionMask

EAGER = ("eager", "baddbmm")  # the kernels that write transformers' eager order out


def takes_eager(impl: str, q: Tensor) -> bool:
    """Whether a layer running kernel `impl` attends in transformers' eager order here: in
    16-bit floats, where the op order is part of the numbers (a component that writes its
    family's own eager ops: LongT5's blocks, DeBERTa's relative terms)."""
    return impl in EAGER and q.element_size() < 4


def eager_refuses(q: Tensor, k: Tensor, mask: AttentionMask, scoring: Scoring) -> str | None:
    """The eager order matters in 16-bit floats, where every op rounds. Wider floats go to
    SDPA: a rounding more or less is invisible there, and SDPA runs several times faster
    without the (Tq, Tk) scores. No soft-cap or value term: the explicit `math` kernel."""
    if q.element_size() >= 4:
        return f"{q.dtype}: transformers' eager order changes no bits in wide floats"
    if scoring.softcap is not None:
        return "soft-capped scores: the math kernel"
    if scoring.needs_probs:
        return "a position term on the values: the math kernel"
    if scoring.global_qkv is not None:
        return "separate global projections: the blocked kernel"
    return None


def eager_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    keep: Tensor | None,
    *,
    scale: float,
    bias: Tensor | None = None,
    sinks: Tensor | None = None,
    dropout_p: float = 0.0,
    fused_bias: bool = False,
) -> tuple[Tensor, Tensor]:
    """q (B, H, Tq, hd), k and v (B, Hkv, Tk, hd), keep a bool (B|1, 1, Tq, Tk) or None, bias
    an additive score term, sinks (H,) -> output (B, H, Tq, hd) and probabilities (B, H, Tq, Tk),
    every op in q's dtype. A wider bias widens the scores (MPT's float32 ALiBi: the softmax
    then runs in float32 and rounds to q's dtype); `fused_bias`: bias + scale * q k^T in one
    baddbmm, rounded once (BLOOM)."""
    if k.shape[1] != q.shape[1]:
        k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)  # (B, H, Tk, hd)
        v = v.repeat_interleave(q.shape[1] // v.shape[1], dim=1)
    if fused_bias and bias is not None:
        scores = _baddbmm_scores(q, k, bias.to(q.dtype), scale)
    else:
        scores = (q @ k.transpose(-1, -2)) * scale  # (B, H, Tq, Tk)
        if bias is not None:
            scores = scores + bias  # promotes to a wider bias's dtype
    if keep is not None:
        scores = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
    if sinks is not None:  # GPT-OSS: [scores | sink] less the row's max, in q's dtype
        sink = sinks.to(scores.dtype).view(1, -1, 1, 1).expand(*scores.shape[:-1], 1)
        scores = torch.cat([scores, sink], dim=-1)  # (B, H, Tq, Tk + 1)
        probs = (scores - scores.amax(-1, keepdim=True)).softmax(-1)[..., :-1]
    else:
        probs = scores.softmax(-1)
    probs = probs.to(q.dtype)
    dropped = F.dropout(probs, dropout_p) if dropout_p else probs
    return dropped @ v, probs  # (B, H, Tq, hd), (B, H, Tq, Tk)


def _baddbmm_scores(q: Tensor, k: Tensor, bias: Tensor, scale: float) -> Tensor:
    """bias + scale * q k^T in one kernel: (B, H, Tq, Tk). q (B, H, Tq, hd), k (B, H, Tk, hd)."""
    B, H, Tq, hd = q.shape
    Tk = k.shape[2]
    bias = bias.expand(B, H, Tq, Tk).reshape(B * H, Tq, Tk)
    scores = torch.baddbmm(
        bias, q.reshape(B * H, Tq, hd), k.reshape(B * H, Tk, hd).transpose(1, 2), alpha=scale
    )  # (B*H, Tq, Tk)
    return scores.view(B, H, Tq, Tk)


def eager_under_mask(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: AttentionMask,
    scoring: Scoring,
    *,
    fused_bias: bool = False,
) -> tuple[Tensor, Tensor]:
    """`eager_attention` under the mask's dense form with the call's terms; a query with no
    allowed key gets zeros: (B, H, Tq, hd) and the probabilities (B, H, Tq, Tk)."""
    out, probs = eager_attention(
        q,
        k,
        v,
        mask.dense(),
        scale=scoring.scale_of(q),
        bias=scoring.bias,
        sinks=scoring.sinks,
        dropout_p=scoring.dropout,
        fused_bias=fused_bias,
    )  # (B, H, Tq, hd)
    return mask.zero_empty_rows(out), probs


@attention_kernel("eager", refuses=eager_refuses)
def eager(
    q: Tensor, k: Tensor, v: Tensor, mask: AttentionMask, scoring: Scoring
) -> tuple[Tensor, Tensor]:
    """transformers' eager attention op by op in the activations' 16-bit dtype (its bits)"""
    return eager_under_mask(q, k, v, mask, scoring)
