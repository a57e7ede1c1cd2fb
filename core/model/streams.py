"""The model's outputs over predicting streams (ProphetNet's n-gram decoder)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from torch import Tensor

from ..parts.forward_inputs import ForwardBatch
from ..parts.interfaces import Head


def stream_outputs(
    head: Head, streams: Tensor, mask: Tensor | None, batch: ForwardBatch
) -> tuple[dict[str, Any], Tensor | None]:
    """An LM head on predicting streams (B, n, T, D): `logits` of stream 0 (the next
    token's), `logits_ngram` of the others, and the loss of every stream against the
    same labels, averaged over all their scored tokens (as transformers' ProphetNet; a
    `num_items_in_batch` counts one stream's tokens, so it is taken n times)."""
    B, n, T, D = streams.shape
    rows = streams.transpose(0, 1).reshape(n * B, T, D)  # (n B, T, D): stream after stream

    def repeat(t: Tensor | None) -> Tensor | None:
        return None if t is None else t.repeat(n, *([1] * (t.dim() - 1)))

    per_stream = replace(
        batch,
        labels=repeat(batch.labels),
        shift_labels=repeat(batch.shift_labels),
        num_items=None if batch.num_items is None else batch.num_items * n,
    )
    named, loss = head.outputs(rows, repeat(mask), per_stream)
    logits = named.get("logits")
    if logits is not None:
        named["logits"] = logits[:B]
        if n > 1:  # (B, n - 1, T, V)
            named["logits_ngram"] = logits[B:].view(n - 1, B, T, -1).transpose(0, 1)
    return named, loss
