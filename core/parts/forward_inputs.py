"""A forward pass's inputs gathered in one place: what each stack reads and what the head scores."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from .input_checks import describe


@dataclass
class ForwardBatch:
    """`ZooModel.forward`'s inputs. A head's `prepare_batch` hook may reshape them before the
    stacks run (multiple choice: (B, C, T) rows as (B*C, T)); the model fills `documents`."""

    input_ids: Tensor | None
    attention_mask: Tensor | None
    token_type_ids: Tensor | None
    position_ids: Tensor | None
    langs: Tensor | None
    decoder_input_ids: Tensor | None
    decoder_attention_mask: Tensor | None
    attention_inputs: Mapping[str, Tensor] | None
    document_ids: Tensor | None
    decoder_document_ids: Tensor | None
    labels: Tensor | None
    shift_labels: Tensor | None
    num_items: float | Tensor | None
    label_smoothing: float
    return_logits: bool
    choices: tuple[int, int] | None = None  # (B, C) when the rows are each example's choices
    documents: Tensor | None = (
        None  # run numbers (archzoo.model.documents) of the first stack's rows
    )
    decoder_documents: Tensor | None = None

    def stack_inputs(self, two_stacks: bool) -> tuple[dict[str, Any] | None, dict[str, Any]]:
        """Keywords of `Stack.forward` for the encoder of an encoder-decoder model (None
        otherwise) and for the stack whose output the head reads."""
        shared = {"attention_inputs": self.attention_inputs}
        first = {
            "input_ids": self.input_ids,
            "attention_mask": self.attention_mask,
            "token_type_ids": self.token_type_ids,
            "langs": self.langs,
            "documents": self.documents,
            **shared,
        }
        if not two_stacks:
            return None, {**first, "position_ids": self.position_ids}
        target = {
            "input_ids": self.decoder_input_ids,
            "attention_mask": self.decoder_attention_mask,
            "position_ids": self.position_ids,
            "memory_mask": self.attention_mask,
            **shared,
        }
        if self.decoder_documents is not None:
            target.update(documents=self.decoder_documents, memory_documents=self.documents)
        return first, target


def flatten_choices(head: str, input_ids: Tensor | None, *others: Tensor | None) -> tuple[Any, ...]:
    """(B, C), then input_ids and the others of a multiple-choice batch as (B*C, T)."""
    if input_ids is None or input_ids.dim() != 3:
        got = None if input_ids is None else tuple(input_ids.shape)
        raise ValueError(f"head {head!r} takes input_ids of shape (batch, choices, seq), got {got}")
    B, C, T = input_ids.shape
    flat = []
    names = ("attention_mask", "token_type_ids", "position_ids", "langs")
    for name, t in zip(names, others, strict=True):
        if t is not None and tuple(t.shape) != (B, C, T):
            raise ValueError(
                f"{name} of shape {tuple(t.shape)} does not match input_ids' {(B, C, T)}"
            )
        flat.append(None if t is None else t.reshape(B * C, T))
    return (B, C), input_ids.reshape(B * C, T), *flat


def flatten_inputs(
    inputs: Mapping[str, Tensor] | None, choices: tuple[int, int]
) -> Mapping[str, Tensor] | None:
    """Per-batch attention inputs of (B, C, ...) shape as (B*C, ...), like input_ids."""
    if not inputs:
        return inputs
    return {
        k: v.flatten(0, 1) if v.dim() > 2 and tuple(v.shape[:2]) == choices else v
        for k, v in inputs.items()
    }


def kept_positions(logits_to_keep: Any, length: int) -> slice | Tensor:
    """transformers' `logits_to_keep`: an int n keeps the last n positions (0: all), a 1-D
    integer tensor the positions it lists."""
    if isinstance(logits_to_keep, int):
        return slice(-logits_to_keep, None)
    if (
        not isinstance(logits_to_keep, Tensor)
        or logits_to_keep.dim() != 1
        or logits_to_keep.dtype not in (torch.int64, torch.int32)
    ):
        got = describe(logits_to_keep)
        raise ValueError(
            f"logits_to_keep must be an int or a 1-D integer tensor of positions, got {got}"
        )
    if logits_to_keep.numel() and not bool(
        ((logits_to_keep >= -length) & (logits_to_keep < length)).all()
    ):
        raise ValueError(
            f"logits_to_keep holds positions outside [-{length}, {length}): "
            f"{logits_to_keep.tolist()}"
        )
    return logits_to_keep
