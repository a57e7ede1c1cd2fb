"""Packed rows: several documents back to back in one row, kept apart by the attention mask.

A row's `document_ids` (B, T) give each token's document; a document is a maximal run of
equal ids, so [7, 7, 3, 3, 7] holds three documents. The model turns them into run numbers
0, 1, 2... (`document_runs`): attention never crosses a run boundary (one more factor of the
AttentionMask) and positions restart at 0 in each run (`document_positions`). In an
encoder-decoder model the decoder's k-th document attends to the encoder's k-th.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..parts.input_checks import INTEGER_DTYPES, describe


def check_document_ids(docs: Tensor | None, name: str, shape: tuple[int, int], of: str) -> None:
    """`docs` is None or an integer tensor of the shape of `of`'s ids."""
    if docs is None:
        return
    if not isinstance(docs, Tensor) or docs.dtype not in INTEGER_DTYPES or docs.dim() != 2:
        raise ValueError(
            f"{name} must be an integer tensor of shape (batch, seq), got {describe(docs)}"
        )
    if tuple(docs.shape) != tuple(shape):
        raise ValueError(
            f"{name} must have the shape of {of} {tuple(shape)}, got {tuple(docs.shape)}"
        )


def document_runs(document_ids: Tensor) -> Tensor:
    """(B, T) run number of each token: 0 for the row's first document, +1 at each change."""
    change = document_ids[:, 1:] != document_ids[:, :-1]  # (B, T - 1)
    first = torch.zeros_like(document_ids[:, :1])
    return torch.cat([first, change.long().cumsum(-1)], dim=1)  # (B, T)


def document_positions(runs: Tensor) -> Tensor:
    """(B, T) position of each token inside its document (0 at every document's start)."""
    B, T = runs.shape
    index = torch.arange(T, device=runs.device).expand(B, T)
    starts = torch.ones_like(runs, dtype=torch.bool)
    starts[:, 1:] = runs[:, 1:] != runs[:, :-1]
    first = torch.where(starts, index, 0).cummax(-1).values  # (B, T) start of each token's run
    return index - first
