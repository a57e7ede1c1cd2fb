"""Sequence pooling: first token, mean or max over real tokens, or last real token."""

from __future__ import annotations

import torch
from torch import Tensor


def pool(hidden: Tensor, attention_mask: Tensor | None, how: str) -> Tensor:
    """(B, T, D) -> (B, D)."""
    if how == "cls":
        return hidden[:, 0]
    if attention_mask is None:
        attention_mask = torch.ones(hidden.shape[:2], dtype=torch.bool, device=hidden.device)
    m = attention_mask.to(hidden.dtype)[..., None]  # (B, T, 1)
    if how == "mean":
        return (hidden * m).sum(1) / m.sum(1).clamp_min(1.0)
    if how == "max":  # padding never wins (sentence-transformers' max pooling)
        return hidden.masked_fill(m == 0, torch.finfo(hidden.dtype).min).amax(1)
    # last real token: highest index with mask 1 (works for left and right padding)
    idx = torch.arange(hidden.shape[1], device=hidden.device)
    last = (attention_mask.to(torch.long) * idx).argmax(dim=1)  # (B,)
    return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]
