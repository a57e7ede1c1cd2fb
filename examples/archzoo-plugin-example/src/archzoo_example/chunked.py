"""A plugin's attention kernel: the softmax written out, a block of queries at a time.

Written only against docs/plugins.md ("Attention kernels"): a function of q, k, v, the mask
and the scoring terms, declared with `attention_kernel`, that says which calls it cannot
compute exactly (they then run archzoo's `auto`). Peak memory is one block of scores,
(B, H, 64, Tk), instead of (B, H, Tq, Tk).
"""

from __future__ import annotations

import torch
from torch import Tensor

from archzoo.parts.kernels import Scoring, attention_kernel
from archzoo.parts.masks import AttentionMask

ROWS = 64  # queries per block


def chunked_refuses(q: Tensor, k: Tensor, mask: AttentionMask, scoring: Scoring) -> str | None:
    if scoring.softcap is not None or scoring.sinks is not None or scoring.values is not None:
        return "plain softmax scores only"
    if scoring.dropout:
        return "dropout"
    if scoring.global_qkv is not None:
        return "separate global projections"
    return None


@attention_kernel("chunked", refuses=chunked_refuses)
def chunked(
    q: Tensor, k: Tensor, v: Tensor, mask: AttentionMask, scoring: Scoring
) -> tuple[Tensor, None]:
    """the softmax written out, 64 queries at a time"""
    k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)  # (B, H, Tk, hd)
    v = v.repeat_interleave(q.shape[1] // v.shape[1], dim=1)
    allowed = mask.allowed()  # (B|1, 1, Tq, Tk) or None
    outs = []
    for start in range(0, q.shape[2], ROWS):
        rows = slice(start, start + ROWS)
        s = q[:, :, rows] @ k.transpose(-1, -2) * scoring.scale_of(q)  # (B, H, c, Tk)
        if scoring.bias is not None:
            s = s + scoring.bias[..., rows, :]
        if allowed is not None:
            s = s.masked_fill(~allowed[..., rows, :], float("-inf"))
        p = s.float().softmax(-1).nan_to_num(0.0).to(q.dtype)  # a row with no key: zeros
        outs.append(p @ v)  # (B, H, c, hd)
    return torch.cat(outs, dim=2), None
