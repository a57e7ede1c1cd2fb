"""Eager attention with the score bias added inside the q k^T matmul (BLOOM's order).

`torch.baddbmm(bias, q, k^T, alpha=scale)` rounds bias + scale * q k^T once, where the
plain eager order rounds q k^T, the scaled scores and the sum each; in 16-bit floats only
this order gives BLOOM's transformers bits.
"""

from __future__ import annotations

from torch import Tensor

from archzoo.parts.kernels import Scoring, attention_kernel
from archzoo.parts.masks import AttentionMask

from .eager import eager_refuses, eager_under_mask


@attention_kernel("baddbmm", refuses=eager_refuses)
def baddbmm(
    q: Tensor, k: Tensor, v: Tensor, mask: AttentionMask, scoring: Scoring
) -> tuple[Tensor, Tensor]:
    """eager, with the score bias and scale fused into one baddbmm (BLOOM's 16-bit bits)"""
    return eager_under_mask(q, k, v, mask, scoring, fused_bias=True)
