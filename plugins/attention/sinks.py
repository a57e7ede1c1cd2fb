"""Attention sinks (GPT-OSS): a learned logit per head that joins every softmax denominator
and carries no value, so a head may put its weight on nothing.

p_j = exp(s_j) / (sum_i exp(s_i) + exp(sink_h)). Two exact ways onto the fast kernels:

- SDPA: one extra key and value of zeros per key/value head. Its score q . 0 = 0 plus the
  float mask's sink column is the sink, so SDPA's softmax runs over [scores | sink] and the
  sink adds nothing to the output.
- FlexAttention (any kernel that returns the logsumexp L of the scores): the plain output
  times Z / (Z + e^sink) = sigmoid(L - sink).
"""

from __future__ import annotations

from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import Tensor

from archzoo.parts.masks import AttentionMask

from .flex import flex_available, mask_flex


def sink_sdpa(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    keep: Tensor | None,
    sinks: Tensor,
    *,
    bias: Tensor | None = None,
    scale: float | None = None,
    dropout_p: float = 0.0,
) -> Tensor:
    """SDPA over the keys plus a zero sink key: q (B, H, Tq, hd), k/v (B, Hkv, Tk, hd), keep a
    bool (B|1, 1, Tq, Tk) or None, bias an additive score term, sinks (H,) -> (B, H, Tq, hd)."""
    B, H, Tq, hd = q.shape
    Hkv, Tk = k.shape[1], k.shape[2]
    zeros = k.new_zeros(B, Hkv, 1, hd)
    k = torch.cat([k, zeros], dim=2)  # (B, Hkv, Tk + 1, hd)
    v = torch.cat([v, zeros.to(v.dtype)], dim=2)
    scores = q.new_zeros(1, 1, Tq, Tk) if bias is None else bias.to(q.dtype)
    if keep is not None:
        scores = torch.where(keep, scores, torch.finfo(q.dtype).min)
    lead = scores.shape[0]
    sink = sinks.to(q.dtype).view(1, H, 1, 1).expand(lead, H, Tq, 1)
    attn_mask = torch.cat([scores.expand(lead, H, Tq, Tk), sink], dim=-1)  # (B|1, H, Tq, Tk+1)
    return F.scaled_dot_product_attention(
        q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, scale=scale, enable_gqa=H != Hkv
    )


def sink_correction(out: Tensor, lse: Tensor, sinks: Tensor) -> Tensor:
    """A plain attention output (B, H, Tq, hd) and its logsumexp (B, H, Tq), sinks (H,) ->
    the output with the sink in the denominator (a row with no key, L = -inf, gives 0)."""
    share = torch.sigmoid(lse.float() - sinks.float().view(1, -1, 1))  # Z / (Z + e^sink)
    return out * share.to(out.dtype)[..., None]


def flex_lse_available(q: Tensor) -> bool:
    """Whether FlexAttention can return the logsumexp here: on CUDA (compiled CPU cannot)."""
    return flex_available() and q.device.type == "cuda"


def flex_with_sinks(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: AttentionMask,
    sinks: Tensor,
    *,
    scale: float | None,
    score_mod: Any = None,
) -> Tensor:
    """FlexAttention under the mask, the sink folded in through the logsumexp (of the scores
    `score_mod` changed, when given)."""
    out, lse = mask_flex(q, k, v, mask, scale=scale, return_lse=True, score_mod=score_mod)
    return sink_correction(out, lse, sinks)


def sink_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: AttentionMask,
    sinks: Tensor,
    *,
    bias: Tensor | None = None,
    scale: float | None = None,
    dropout_p: float = 0.0,
    impl: Literal["auto", "sdpa", "flex"] = "auto",
) -> Tensor:
    """Dense attention with sinks under a mask: FlexAttention on CUDA (no score bias, no
    dropout), else SDPA with the zero sink key (compiled CPU FlexAttention has no logsumexp).
    Rows with no key give 0."""
    if impl == "auto":
        use_flex = flex_lse_available(q) and bias is None and dropout_p == 0.0
        impl = "flex" if use_flex else "sdpa"
    if impl == "flex":
        if bias is not None or dropout_p:
            raise ValueError("the FlexAttention sink path takes no score bias and no dropout")
        out = flex_with_sinks(q, k, v, mask, sinks, scale=scale)
    else:
        out = sink_sdpa(q, k, v, mask.dense(), sinks, bias=bias, scale=scale, dropout_p=dropout_p)
    return mask.zero_empty_rows(out)


def softmax_with_sinks(scores: Tensor, sinks: Tensor) -> Tensor:
    """softmax over [scores | sink] without the sink column: scores (B, H, Tq, Tk), sinks (H,)."""
    sink = sinks.to(scores.dtype).view(1, -1, 1, 1).expand(*scores.shape[:-1], 1)
    return torch.cat([scores, sink], dim=-1).softmax(-1)[..., :-1]
