"""ALBERT's factorized embedding: an E-wide token table, projected up to d_model."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torch import Tensor, nn

from archzoo.component import param
from archzoo.interfaces import Dims, Embedding, NormFactory


class FactorizedEmbedding(Embedding):
    name = "factorized"
    summary = "E-wide token (+ type, + position) embedding, norm and dropout, then Linear E -> d"

    @dataclass
    class Config:
        embedding_size: int = param(
            128, "width E of the token table (ALBERT: 128)", min=1, max=65536
        )
        type_vocab_size: int = param(
            0, "segment/token-type ids (ALBERT: 2); 0 for none", min=0, max=65536
        )
        scale: bool = param(False, "multiply token vectors by sqrt(embedding_size)")
        norm: bool = param(False, "normalise the summed E-wide embeddings (ALBERT)")
        dropout: float | None = param(
            None, "dropout before the projection (null: model dropout)", min=0.0, lt=1.0
        )

    @classmethod
    def embed_width(cls, cfg: Any, dims: Dims) -> int:
        return cfg.embedding_size

    def __init__(self, cfg: Any, dims: Any, *, make_norm: NormFactory) -> None:
        super().__init__(cfg, dims)
        width = cfg.embedding_size
        self.word = nn.Embedding(dims.vocab_size, width)
        self.token_type = nn.Embedding(cfg.type_vocab_size, width) if cfg.type_vocab_size else None
        self.norm = make_norm(dim=width) if cfg.norm else None
        self.dropout = nn.Dropout(dims.dropout if cfg.dropout is None else cfg.dropout)
        self.project = nn.Linear(width, dims.d_model)
        self.multiplier = width**0.5 if cfg.scale else 1.0

    def word_weight(self) -> nn.Parameter:
        return self.word.weight

    def share_word_weight(self, other: Embedding) -> None:
        """Use `other`'s (vocab, E) token table (encoder-decoder models with one vocabulary)."""
        weight = other.word_weight()
        if weight.shape != self.word.weight.shape:
            raise ValueError(
                f"cannot share a {tuple(weight.shape)} token table with a factorized "
                f"embedding of shape {tuple(self.word.weight.shape)}"
            )
        self.word.weight = weight

    def forward(
        self,
        input_ids: Tensor,
        token_type_ids: Tensor | None = None,
        position_embeds: Tensor | None = None,
    ) -> Tensor:
        x = self.word(input_ids)  # (B, T, E)
        if self.multiplier != 1.0:
            x = x * self.multiplier
        if self.token_type is not None:
            if token_type_ids is None:
                token_type_ids = input_ids.new_zeros(input_ids.shape)
            x = x + self.token_type(token_type_ids)
        if position_embeds is not None:
            x = x + position_embeds.to(x.dtype)  # (B, T, E): the builder sizes positions to E
        if self.norm is not None:
            x = self.norm(x)
        return self.project(self.dropout(x))  # (B, T, d_model)
