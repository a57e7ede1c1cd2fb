"""Extractive question answering: a start and an end logit per token (SQuAD-style span)."""

from __future__ import annotations

from typing import Any

import torch.nn.functional as F
from torch import Tensor, nn

from .pooling import PooledHead, TokenPoolerConfig


class QuestionAnsweringHead(PooledHead, name="question_answering"):
    """span extraction: linear to (start, end) logits per token; labels (B, 2) positions"""

    Config = TokenPoolerConfig

    def __init__(self, cfg: Any, dims: Any, **parts: Any) -> None:
        super().__init__(cfg, dims, **parts)
        self.qa_outputs = nn.Linear(dims.d_model, 2)

    def forward(self, hidden: Tensor, attention_mask: Tensor | None = None) -> dict[str, Tensor]:
        start, end = self.qa_outputs(self.transform(hidden)).unbind(-1)  # (B, T) each
        return {"start_logits": start, "end_logits": end}

    def loss(self, outputs: dict[str, Tensor], labels: Tensor) -> Tensor:
        """Mean of the start and end cross-entropies; positions outside the sequence (as
        HF clamps them to T) are ignored."""
        T = outputs["start_logits"].shape[1]
        losses = []
        for logits, positions in zip(
            (outputs["start_logits"], outputs["end_logits"]), labels.unbind(-1), strict=True
        ):
            target = positions.clamp(0, T).to(logits.device)  # (B,)
            losses.append(F.cross_entropy(logits.float(), target, ignore_index=T))
        return (losses[0] + losses[1]) / 2
