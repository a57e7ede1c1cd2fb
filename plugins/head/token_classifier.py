"""Per-token classification (NER, tagging): optional pooler, dropout, then a linear layer on
every position."""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from archzoo.parts.component import dropout_param, param

from .losses import token_cross_entropy
from .pooling import PooledHead, TokenPoolerConfig


class TokenClassifierHead(PooledHead, name="token_classifier"):
    """a label per token: optional pooler, dropout, then linear to num_labels"""

    class Config(TokenPoolerConfig):
        num_labels: int = param(2, "number of tag classes", min=1, max=1_000_000)
        dropout: float | None = dropout_param("dropout before the classifier (null: model dropout)")
        labels: list[str] | None = param(None, "the tag names in index order (HF id2label)")

    def __init__(self, cfg: Any, dims: Any, **parts: Any) -> None:
        super().__init__(cfg, dims, **parts)
        self.dropout = nn.Dropout(dims.dropout if cfg.dropout is None else cfg.dropout)
        self.classifier = nn.Linear(dims.d_model, cfg.num_labels)

    def forward(self, hidden: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        return self.classifier(self.dropout(self.transform(hidden)))  # (B, T, num_labels)

    def loss(self, logits: Tensor, labels: Tensor) -> Tensor:
        return token_cross_entropy(logits, labels, shift=False)
