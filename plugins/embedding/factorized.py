"""ALBERT's factorized embedding: an E-wide token table, projected up to d_model."""

from __future__ import annotations

from typing import Any, Literal

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

    @classmethod
    def embed_width(cls, cfg: Any, dims: Dims) -> int:
        return cfg.embedding_size

    @classmethod
    def position_width(cls, cfg: Any, dims: Dims) -> int:
        return cfg.embedding_size if cfg.positions == "before" else dims.d_model

    def __init__(self, cfg: Any, dims: Any, *, make_norm: NormFactory) -> None:
        super().__init__(cfg, dims, make_norm=make_norm)
        self.project = nn.Linear(cfg.embedding_size, dims.d_model, bias=cfg.project_bias)

    def late_positions(self) -> bool:
        """OPT: positions are d_model wide, added once projected."""
        return self.cfg.positions == "after"

    def finish(self, x: Tensor, positions: Tensor | None) -> Tensor:
        if not self.late_positions():  # positions (sized to E) joined the E-wide sum
            return self.project(self.dropout(x))  # (B, T, d_model)
        x = self.project(x)  # (B, T, d_model)
        if positions is not None:
            x = x + positions.to(x.dtype)
        return self.dropout(x)
