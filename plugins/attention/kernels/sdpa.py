"""torch's scaled_dot_product_attention: the default kernel of dense attention.

The mask's factors reach SDPA as `is_causal` alone where they allow (no padding, no pattern),
else as one boolean or additive mask made once per forward; a score bias is folded into it.
Sinks run as one extra zero key whose mask entry is the sink logit (sinks.py). SDPA forms no
probabilities and has no hook before its softmax, so it refuses soft-capped scores and a
value term; probabilities asked for beside it are recomputed (archzoo.parts.attention_probs).
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor

from archzoo.parts.kernels import Scoring, attention_kernel
from archzoo.parts.masks import AttentionMask

from .sinks import sink_sdpa


def sdpa_refuses(q: Tensor, k: Tensor, mask: AttentionMask, scoring: Scoring) -> str | None:
    if scoring.softcap is not None:
        return "soft-capped scores: SDPA has no hook before its softmax"
    if scoring.needs_probs:
        return "a position term on the values needs the probabilities"
    if scoring.global_qkv is not None:
        return "separate global projections: the blocked kernel"
    return None


@attention_kernel("sdpa", refuses=sdpa_refuses)
def sdpa(
    q: Tensor, k: Tensor, v: Tensor, mask: AttentionMask, scoring: Scoring
) -> tuple[Tensor, None]:
    """torch.nn.functional.scaled_dot_product_attention under the mask (sinks: a zero key)"""
    if scoring.sinks is not None:
        keep = mask.dense()
        out = sink_sdpa(
            q,
            k,
            v,
            keep,
            scoring.sinks,
            bias=scoring.bias,
            scale=scoring.scale,
            dropout_p=scoring.dropout,
        )  # (B, H, Tq, hd)
        return mask.zero_empty_rows(out), None
    out = F.scaled_dot_product_attention(
        q,
        k,
        v,
        **mask.sdpa(scoring.bias, q.dtype),
        dropout_p=scoring.dropout,
        scale=scoring.scale,
        enable_gqa=q.shape[1] != k.shape[1] and not scoring.broadcast_kv,
    )  # (B, H, Tq, hd)
    return mask.zero_empty_rows(out), None
