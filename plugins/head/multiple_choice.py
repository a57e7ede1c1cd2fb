"""Multiple choice: each (example, choice) sequence pooled to one score; softmax over choices."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Literal

import torch.nn.functional as F
from torch import Tensor, nn

from archzoo.parts.component import param
from archzoo.parts.forward_inputs import ForwardBatch, flatten_choices, flatten_inputs

from .pooling import PooledHead, PoolerConfig, pool


class MultipleChoiceHead(PooledHead, name="multiple_choice", choices=True):
    """inputs (B, C, T): pool each choice, optional pooler, one logit per choice (B, C)"""

    families = ("encoder",)

    class Config(PoolerConfig):
        pooling: Literal["cls", "mean", "last", "end"] = param(
            "cls",
            "which vector represents a choice's sequence (last: its last real token; end: "
            "its last place, padding or not, as RoFormer's sequence summary reads it)",
        )
        dropout: float | None = param(
            None, "dropout before the scorer (null: model dropout)", min=0.0, lt=1.0
        )

    def __init__(self, cfg: Any, dims: Any, **parts: Any) -> None:
        super().__init__(cfg, dims, **parts)
        self.dropout = nn.Dropout(dims.dropout if cfg.dropout is None else cfg.dropout)
        self.classifier = nn.Linear(dims.d_model, 1)

    def prepare_batch(self, batch: ForwardBatch) -> ForwardBatch:
        """(B, C, T) inputs as B*C sequences for the stacks."""
        choices, ids, mask, segments, positions, langs = flatten_choices(
            self.name,
            batch.input_ids,
            batch.attention_mask,
            batch.token_type_ids,
            batch.position_ids,
            batch.langs,
        )
        return replace(
            batch,
            input_ids=ids,
            attention_mask=mask,
            token_type_ids=segments,
            position_ids=positions,
            langs=langs,
            attention_inputs=flatten_inputs(batch.attention_inputs, choices),
            choices=choices,
        )

    def regroup(
        self, hidden: Tensor, attention_mask: Tensor | None, batch: ForwardBatch
    ) -> tuple[Tensor, Tensor | None]:
        """(B*C, T, D) back to (B, C, T, D): the head sees each example's choices together."""
        hidden = hidden.view(*batch.choices, *hidden.shape[1:])  # (B, C, T, D)
        mask = None if attention_mask is None else attention_mask.view(*batch.choices, -1)
        return hidden, mask  # mask (B, C, T)

    def forward(self, hidden: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        """hidden (B, C, T, D), attention_mask (B, C, T) -> logits (B, C)."""
        B, C = hidden.shape[:2]
        flat_mask = None if attention_mask is None else attention_mask.flatten(0, 1)
        x = self.transform(pool(hidden.flatten(0, 1), flat_mask, self.cfg.pooling))  # (B*C, D)
        return self.classifier(self.dropout(x)).view(B, C)  # (B, C)

    def loss(self, logits: Tensor, labels: Tensor) -> Tensor:
        """Cross-entropy over the choices; labels (B,) hold the right choice (-100: ignored)."""
        return F.cross_entropy(logits.float(), labels.view(-1).to(logits.device))
