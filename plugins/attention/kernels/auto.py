"""`auto`: the fastest built-in kernel that serves the call, and where refused calls go.

In order: FlexAttention where it runs compiled (CUDA, or under torch.compile) and the call
has something SDPA lacks (a sparse pattern, a soft-cap, sinks); the blocked kernel for a
sparse pattern longer than one block (O(n * w)); SDPA; the explicit `math` kernel for what
SDPA refuses (soft-caps, value terms). Each candidate is asked whether it serves the call.
"""

from __future__ import annotations

import torch
from torch import Tensor

from archzoo.parts.kernels import AttentionKernel, Scoring, attention_kernel
from archzoo.parts.masks import AttentionMask

from .blocked import blocked
from .flex import flex
from .math import math
from .sdpa import sdpa


def choose(q: Tensor, k: Tensor, mask: AttentionMask, scoring: Scoring) -> AttentionKernel:
    """The kernel `auto` runs for this call."""
    fast = q.device.type == "cuda" or torch.compiler.is_compiling()
    special = mask.pattern is not None or scoring.softcap is not None or scoring.sinks is not None
    if fast and special and flex.refuses(q, k, mask, scoring) is None:
        return flex
    # one block: blocking saves nothing (the same T x T scores, padded), and dense SDPA gives
    # transformers' bits in 16-bit floats
    worth = mask.pattern is not None and (
        scoring.global_qkv is not None or k.shape[2] > getattr(mask.pattern, "block", 0)
    )
    if worth and blocked.refuses(q, k, mask, scoring) is None:
        return blocked
    if scoring.global_qkv is not None:
        raise ValueError("separate global projections need the blocked path (no KV cache)")
    if sdpa.refuses(q, k, mask, scoring) is None:
        return sdpa
    return math


@attention_kernel("auto")
def auto(
    q: Tensor, k: Tensor, v: Tensor, mask: AttentionMask, scoring: Scoring
) -> tuple[Tensor, Tensor | None]:
    """the fastest built-in kernel that serves each call (flex, blocked, sdpa, then math)"""
    return choose(q, k, mask, scoring).run(q, k, v, mask, scoring)
