"""Cross-entropy with HF conventions: ignore index -100, optional next-token shift."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor

IGNORE_INDEX = -100


def token_cross_entropy(logits: Tensor, labels: Tensor, *, shift: bool) -> Tensor:
    """Mean CE over tokens whose label is not -100; with shift, position t predicts t+1."""
    if shift:  # shift the labels, not the logits: slicing (B, T, V) logits would copy them
        labels = F.pad(labels[:, 1:], (0, 1), value=IGNORE_INDEX)
    return F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]).float(),  # (B*T, V)
        labels.reshape(-1).to(logits.device),
        ignore_index=IGNORE_INDEX,
    )
