"""Sequence classification: pool (CLS, mean, last token or last <eos>), optional pooler,
linear."""

from __future__ import annotations

from typing import Any, Literal

import torch.nn.functional as F
from torch import Tensor, nn

from archzoo.parts.component import dropout_param, param

from .pooling import PooledHead, PoolerConfig, pool, pool_at_token


class ClassifierHead(PooledHead, name="classifier", token_ids=True):
    """pool the sequence (cls | mean | last | eos), optional dense+activation pooler, then labels"""

    class Config(PoolerConfig):
        num_labels: int = param(
            2, "number of classes (1: regression with MSE)", min=1, max=1_000_000
        )
        pooling: Literal["cls", "mean", "last", "eos"] = param(
            "cls", "which vector represents the sequence (eos: at the last eos_token_id)"
        )
        eos_token_id: int | None = param(
            None, "pooling eos: the token id whose last place in input_ids is pooled", min=0
        )
        dropout: float | None = dropout_param("dropout before the classifier (null: model dropout)")
        bias: bool = param(True, "a bias on the classifier (decoder `score` layers have none)")
        problem_type: Literal[
            "auto", "regression", "single_label_classification", "multi_label_classification"
        ] = param("auto", "the loss (auto: as HF, regression for 1 label, else by label dtype)")
        labels: list[str] | None = param(None, "the class names in index order (HF id2label)")
        pool_scores: bool = param(
            False,
            "score every token first (pooler and classifier), then pool the scores by `pooling` "
            "instead of the states (EuroBERT's late pooling)",
        )

    def __init__(self, cfg: Any, dims: Any, **parts: Any) -> None:
        super().__init__(cfg, dims, **parts)
        self.dropout = nn.Dropout(dims.dropout if cfg.dropout is None else cfg.dropout)
        self.classifier = nn.Linear(dims.d_model, cfg.num_labels, bias=cfg.bias)

    @classmethod
    def check(cls, cfg: Any, dims: Any) -> list[tuple[str, str]]:
        if cfg.pooling == "eos" and cfg.eos_token_id is None:
            return [("eos_token_id", "pooling: eos needs the eos_token_id to pool at")]
        return []

    def forward(
        self, hidden: Tensor, attention_mask: Tensor | None = None, input_ids: Tensor | None = None
    ) -> Tensor:
        if self.cfg.pool_scores:  # (B, T, D) -> (B, T, num_labels), pooled below
            hidden = self.classifier(self.dropout(self.transform(hidden)))
        if self.cfg.pooling == "eos":
            x = pool_at_token(hidden, input_ids, self.cfg.eos_token_id)  # (B, D)
        else:
            x = pool(hidden, attention_mask, self.cfg.pooling)  # (B, D)
        if self.cfg.pool_scores:
            return x  # (B, num_labels)
        x = self.transform(x)
        return self.classifier(self.dropout(x))  # (B, num_labels)

    def loss(self, logits: Tensor, labels: Tensor) -> Tensor:
        """HF's sequence-classification loss: MSE, cross-entropy or per-label BCE."""
        kind = self.cfg.problem_type
        if kind == "auto":
            integer = not labels.is_floating_point()
            kind = (
                "regression" if self.cfg.num_labels == 1 else "single_label" if integer else "multi"
            )
        if kind == "regression":
            if self.cfg.num_labels == 1:
                return F.mse_loss(logits.squeeze(-1).float(), labels.squeeze(-1).float())
            return F.mse_loss(logits.float(), labels.float())
        if kind.startswith("single_label"):
            return F.cross_entropy(logits.float(), labels.view(-1), ignore_index=-100)
        return F.binary_cross_entropy_with_logits(logits.float(), labels.float())
