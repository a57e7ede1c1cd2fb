"""Sequence classification: pool (CLS, mean or last token), optional tanh pooler, linear."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import torch.nn.functional as F
from torch import Tensor, nn

from archzoo.component import param
from archzoo.interfaces import Head

from .pooling import pool


class ClassifierHead(Head):
    name = "classifier"
    summary = "pool the sequence (cls | mean | last), optional dense+tanh pooler, then labels"

    @dataclass
    class Config:
        num_labels: int = param(
            2, "number of classes (1: regression with MSE)", min=1, max=1_000_000
        )
        pooling: Literal["cls", "mean", "last"] = param(
            "cls", "which vector represents the sequence"
        )
        pooler: bool = param(True, "dense + tanh on the pooled vector (BERT's pooler)")
        dropout: float | None = param(
            None, "dropout before the classifier (null: model dropout)", min=0.0, lt=1.0
        )

    def __init__(self, cfg: Any, dims: Any, **_: Any) -> None:
        super().__init__(cfg, dims)
        self.pooler = nn.Linear(dims.d_model, dims.d_model) if cfg.pooler else None
        self.dropout = nn.Dropout(dims.dropout if cfg.dropout is None else cfg.dropout)
        self.classifier = nn.Linear(dims.d_model, cfg.num_labels)

    def forward(self, hidden: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        x = pool(hidden, attention_mask, self.cfg.pooling)  # (B, D)
        if self.pooler is not None:
            x = self.pooler(x).tanh()
        return self.classifier(self.dropout(x))  # (B, num_labels)

    def loss(self, logits: Tensor, labels: Tensor) -> Tensor:
        if self.cfg.num_labels == 1:
            return F.mse_loss(logits.squeeze(-1).float(), labels.float())
        return F.cross_entropy(logits.float(), labels.view(-1), ignore_index=-100)
