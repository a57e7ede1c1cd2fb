"""Language-model head: hidden -> vocabulary logits, tied to the token table or not."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torch import Tensor, nn

from archzoo.component import param
from archzoo.interfaces import Embedding, Head

from .losses import token_cross_entropy


class LMHead(Head):
    name = "lm"
    summary = "project to vocabulary logits (tied to the input embedding or its own weights)"
    families = ("decoder", "encoder-decoder")

    @dataclass
    class Config:
        tie: bool = param(True, "reuse the token embedding table as the output projection")
        bias: bool = param(False, "a bias per vocabulary entry")

    def __init__(self, cfg: Any, dims: Any, *, embedding: Embedding, family: str, **_: Any) -> None:
        super().__init__(cfg, dims)
        self.proj = nn.Linear(dims.d_model, dims.vocab_size, bias=cfg.bias)
        if cfg.tie:
            self.proj.weight = embedding.word_weight()
        self.shift = family == "decoder"

    def forward(self, hidden: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        return self.proj(hidden)  # (B, T, V)

    def loss(self, logits: Tensor, labels: Tensor) -> Tensor:
        return token_cross_entropy(logits, labels, shift=self.shift)
