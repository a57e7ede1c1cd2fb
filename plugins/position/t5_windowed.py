"""T5's bucketed bias looked up only where an attention asks (LongT5's blocked windows), with
an optional second table biasing tokens toward transient-global block summaries."""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from archzoo.parts.component import param

from .t5_relative import T5RelativePosition, t5_buckets


class T5WindowedPosition(T5RelativePosition, name="t5_windowed"):
    """T5 bucketed bias looked up per attention window (LongT5), optional summary table"""

    class Config(T5RelativePosition.Config):
        global_table: bool = param(
            False, "a second table biasing tokens toward transient-global block summaries"
        )

    def __init__(self, cfg: Any, dims: Any, *, causal: bool = False) -> None:
        super().__init__(cfg, dims, causal=causal)
        self.global_table = nn.Embedding(cfg.n_buckets, dims.n_heads) if cfg.global_table else None

    @classmethod
    def check(cls, cfg: Any, dims: Any) -> list[tuple[str, str]]:
        if cfg.per_layer:
            return [("per_layer", "t5_windowed keeps one table per stack (per_layer: false)")]
        return []

    def prepare(self, q_pos: Tensor, k_pos: Tensor) -> tuple[Tensor, Tensor]:
        return q_pos, k_pos  # the positions only: a bias is looked up for what is attended

    def score_bias(self, state: Any, q: Tensor, k: Tensor, scale: float) -> Tensor:
        q_pos, k_pos = state
        return super().prepare(q_pos, k_pos)  # (B, H, Tq, Tk)

    def side_bias(self, distance: Tensor) -> Tensor:
        """(B, Tq, G) global block index minus the query's block -> bias (B, H, Tq, G)."""
        if self.global_table is None:
            raise ValueError(
                "position 't5_windowed' has no table for global summaries; set "
                "position.global_table: true for transient_global attention"
            )
        buckets = t5_buckets(
            distance,
            bidirectional=not self.causal,
            n_buckets=self.cfg.n_buckets,
            max_distance=self.cfg.max_distance,
        )
        return self.global_table(buckets).permute(0, 3, 1, 2)  # (B, H, Tq, G)
