"""ELECTRA's discriminator: per token, was it replaced? dense, activation, one logit."""

from __future__ import annotations

from typing import Any, Literal

import torch.nn.functional as F
from torch import Tensor, nn

from archzoo.parts.component import param
from archzoo.parts.interfaces import Head

from ..ffn.activations import ACTIVATIONS


class DiscriminatorHead(Head, name="discriminator"):
    """replaced-token detection (ELECTRA): dense, activation, one logit per token"""

    families = ("encoder",)

    class Config:
        activation: Literal["relu", "gelu", "gelu_tanh", "gelu_new", "silu"] = param(
            "gelu", "non-linearity after the dense layer (the model's)"
        )

    def __init__(self, cfg: Any, dims: Any, **_: Any) -> None:
        super().__init__(cfg, dims)
        self.dense = nn.Linear(dims.d_model, dims.d_model)
        self.act = ACTIVATIONS[cfg.activation]
        self.prediction = nn.Linear(dims.d_model, 1)

    def forward(self, hidden: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        return self.prediction(self.act(self.dense(hidden))).squeeze(-1)  # (B, T)

    def loss(self, logits: Tensor, labels: Tensor) -> Tensor:
        """Binary cross-entropy over every token; labels (B, T): 1 where replaced."""
        return F.binary_cross_entropy_with_logits(logits.float(), labels.float())

    def masked_loss(
        self, logits: Tensor, labels: Tensor, attention_mask: Tensor | None = None
    ) -> Tensor:
        """Binary cross-entropy over the real tokens only (HF's active positions)."""
        if attention_mask is None:
            return self.loss(logits, labels)
        keep = attention_mask.to(logits.device) == 1  # (B, T)
        return F.binary_cross_entropy_with_logits(logits[keep].float(), labels[keep].float())
