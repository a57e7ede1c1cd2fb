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


def packed_runs(
    family: str,
    document_ids: Tensor | None,
    decoder_document_ids: Tensor | None,
    input_ids: Tensor | None,
    decoder_input_ids: Tensor | None,
    encoder_outputs: Tensor | None,
) -> tuple[Tensor | None, Tensor | None]:
    """Run numbers (`document_runs`) of the first stack's rows and of the decoder's, the ids
    checked against the inputs of a model of this `family`."""
    if family != "encoder-decoder":
        if decoder_document_ids is not None:
            raise ValueError(
                f"decoder_document_ids is for encoder-decoder models; this {family} "
                "model takes document_ids"
            )
        check_document_ids(document_ids, "document_ids", input_ids.shape, "input_ids")
        return document_runs(document_ids), None
    if document_ids is None or decoder_document_ids is None:
        given = "document_ids" if document_ids is not None else "decoder_document_ids"
        raise ValueError(
            f"{given} was given alone: an encoder-decoder model packs both sides, so it "
            "needs document_ids (encoder rows) and decoder_document_ids (decoder rows)"
        )
    source = input_ids if encoder_outputs is None else encoder_outputs
    of = "input_ids" if encoder_outputs is None else "encoder_outputs"
    check_document_ids(document_ids, "document_ids", source.shape[:2], of)
    check_document_ids(
        decoder_document_ids,
        "decoder_document_ids",
        decoder_input_ids.shape,
        "decoder_input_ids",
    )
    return document_runs(document_ids), document_runs(decoder_document_ids)
