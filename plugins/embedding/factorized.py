"""ALBERT's factorized embedding: an E-wide token table, projected up to d_model; or the
token vectors alone projected first (with MobileBERT's trigram input), types, positions and
the norm then at d_model."""

from __future__ import annotations

from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from archzoo.parts.component import dropout_param, param
from archzoo.parts.interfaces import Dims, NormFactory

from .token import TokenEmbedding


class FactorizedEmbedding(TokenEmbedding, name="factorized"):
    """E-wide token (+ type, + position) embedding, norm and dropout, then Linear E -> d

    The token embedding at width E, then a Linear E -> d_model (ALBERT).
    """

    class Config:
        embedding_size: int = param(
            128, "width E of the token table (ALBERT: 128)", min=1, max=65536
        )
        type_vocab_size: int = param(
            0, "segment/token-type ids (ALBERT: 2); 0 for none", min=0, max=65536
        )
        scale: bool = param(False, "multiply token vectors by sqrt(embedding_size)")
        norm: bool = param(False, "normalise the summed E-wide embeddings (ALBERT)")
        dropout: float | None = dropout_param("dropout before the projection (null: model dropout)")
        project_bias: bool = param(True, "a bias on the E -> d_model projection (OPT: none)")
        positions: Literal["before", "after"] = param(
            "before",
            "positions join the E-wide sum (ALBERT) or the projected d_model one (OPT)",
        )
        project: Literal["sum", "tokens"] = param(
            "sum",
            "what the projection takes: the E-wide sum (of tokens, types and positions: "
            "ALBERT, OPT) or the token vectors alone, types, positions and the norm then "
            "joining at d_model (MobileBERT)",
        )
        trigram: bool = param(
            False,
            "project: tokens: each token's vector concatenated with its next and previous "
            "neighbours' ([next | own | previous], zeros past the row's ends), 3E wide, "
            "before the projection (MobileBERT's trigram input)",
        )

    @classmethod
    def embed_width(cls, cfg: Any, dims: Dims) -> int:
        return cfg.embedding_size

    @classmethod
    def sum_width(cls, cfg: Any, dims: Dims) -> int:
        return dims.d_model if cfg.project == "tokens" else cfg.embedding_size

    @classmethod
    def position_width(cls, cfg: Any, dims: Dims) -> int:
        before = cfg.positions == "before" and cfg.project == "sum"
        return cfg.embedding_size if before else dims.d_model

    @classmethod
    def check(cls, cfg: Any, dims: Any) -> list[tuple[str, str]]:
        if cfg.project == "tokens" and cfg.positions == "after":
            return [("positions", "project: tokens adds the positions at d_model already")]
        if cfg.trigram and cfg.project != "tokens":
            return [("trigram", "needs project: tokens (the concatenation is projected)")]
        return super().check(cfg, dims)

    def __init__(self, cfg: Any, dims: Any, *, make_norm: NormFactory) -> None:
        super().__init__(cfg, dims, make_norm=make_norm)
        width = cfg.embedding_size * (3 if cfg.trigram else 1)
        self.project = nn.Linear(width, dims.d_model, bias=cfg.project_bias)

    def token_vectors(self, x: Tensor) -> Tensor:
        """project: tokens: (B, T, E) token vectors (with their neighbours') to (B, T, d)."""
        if self.cfg.project == "sum":
            return x
        if self.cfg.trigram:  # (B, T, 3E): the next token's, its own, the previous one's
            nxt = F.pad(x[:, 1:], (0, 0, 0, 1))  # (B, T, E), zeros after the last
            prev = F.pad(x[:, :-1], (0, 0, 1, 0))  # (B, T, E), zeros before the first
            x = torch.cat([nxt, x, prev], dim=-1)
        return self.project(x)

    def late_positions(self) -> bool:
        """OPT: positions are d_model wide, added once projected."""
        return self.cfg.positions == "after"

    def finish(self, x: Tensor, positions: Tensor | None) -> Tensor:
        if self.cfg.project == "tokens":  # projected already, the sum normed at d_model
            return self.dropout(x)
        if not self.late_positions():  # positions (sized to E) joined the E-wide sum
            return self.project(self.dropout(x))  # (B, T, d_model)
        x = self.project(x)  # (B, T, d_model)
        if positions is not None:
            x = x + positions.to(x.dtype)
        return self.dropout(x)
