"""Sentence embeddings (sentence-transformers): pool the real tokens, optionally normalise."""

from __future__ import annotations

from typing import Literal

import torch.nn.functional as F
from torch import Tensor

from archzoo.parts.component import param

from .none import NoHead
from .pooling import pool


class SentenceEmbeddingHead(NoHead, name="sentence_embedding"):
    """pool real tokens (cls | mean | max | last), optionally to unit norm: (B, D)

    The base model's outputs plus `sentence_embedding` (B, D).
    """

    class Config:
        pooling: Literal["cls", "mean", "max", "last"] = param(
            "mean", "how the token vectors become one sentence vector"
        )
        normalize: bool = param(False, "scale the sentence embedding to unit L2 norm")
        pooler: bool = param(
            False, "BERT's pooler kept from the checkpoint, returned as pooler_output"
        )

    def forward(self, hidden: Tensor, attention_mask: Tensor | None = None) -> dict[str, Tensor]:
        out = super().forward(hidden, attention_mask) or {}
        x = pool(hidden, attention_mask, self.cfg.pooling)  # (B, D)
        out["sentence_embedding"] = F.normalize(x, dim=-1) if self.cfg.normalize else x
        return out
