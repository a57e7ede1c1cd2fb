"""DeBERTa's relative positions (He et al., 2021): one table of relative-distance embeddings
per stack, shared by every layer, whose rows the `disentangled` attention projects with each
layer's own weights (content->position and position->content terms).

Distances i - j are clipped to [-span, span) (span: `max_distance`), or first log-bucketed
into `buckets` (DeBERTa v2/v3): exact below buckets/2, logarithmic up to `max_distance`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import Tensor, nn

from archzoo.parts.component import param
from archzoo.parts.interfaces import Position

from .learned import LearnedPosition


def log_buckets(distance: Tensor, buckets: int, max_distance: int) -> Tensor:
    """DeBERTa v2's bucket of each distance: itself within buckets/2, log-spaced beyond
    (sign kept), reaching buckets - 1 at max_distance."""
    mid = buckets // 2
    near = (distance < mid) & (distance > -mid)
    size = torch.where(near, torch.full_like(distance, mid - 1), distance.abs()).float()
    ratio = torch.log(size / mid) / math.log((max_distance - 1) / mid)
    far = torch.ceil(ratio.float() * (mid - 1)) + mid
    return torch.where(size <= mid, distance.float(), far * distance.sign()).long()


@dataclass
class RelativeTable:
    """What `prepare` hands to the attention: a table row per query-key pair, and the table."""

    index: Tensor  # (B, Tq, Tk) long: the row of `table` for distance i - j
    table: Tensor  # (2 * span, d_model): the relative embeddings (normalised when asked)


class DebertaRelativePosition(Position, name="deberta_relative", bias=True, embed=True):
    """DeBERTa's relative-distance table (clipped or log-bucketed), optional absolute vectors"""

    attentions = ("disentangled",)  # its terms use each layer's projections

    class Config:
        max_distance: int = param(
            512, "distances clip to [-k, k) (HF max_relative_positions)", min=2, max=1 << 20
        )
        buckets: int = param(
            0,
            "log-bucket the distances into this many per side (HF position_buckets; 0: none)",
            min=0,
            max=1 << 16,
        )
        norm: bool = param(False, "layer-normalise the table (HF norm_rel_ebd: layer_norm)")
        eps: float = param(1e-7, "epsilon of the table's norm", gt=0.0)
        absolute: bool = param(
            False,
            "also add a learned vector per position to the embeddings (position_biased_input)",
        )

    def __init__(self, cfg: Any, dims: Any, *, causal: bool = False) -> None:
        super().__init__(cfg, dims, causal=causal)
        self.span = cfg.buckets or cfg.max_distance
        self.relative = nn.Embedding(2 * self.span, dims.d_model)
        self.norm = nn.LayerNorm(dims.d_model, eps=cfg.eps) if cfg.norm else None
        self.absolute = LearnedPosition(LearnedPosition.Config(), dims) if cfg.absolute else None
        if not cfg.absolute:  # this instance adds nothing to the embeddings
            self.capabilities = replace(self.capabilities, embed=False)

    @classmethod
    def check(cls, cfg: Any, dims: Any) -> list[tuple[str, str]]:
        if cfg.buckets and cfg.max_distance - 1 <= cfg.buckets // 2:
            return [
                (
                    "max_distance",
                    f"log buckets need max_distance > buckets / 2 + 1 "
                    f"(got max_distance {cfg.max_distance}, buckets {cfg.buckets})",
                )
            ]
        return []

    def embed(self, positions: Tensor) -> Tensor | None:
        return None if self.absolute is None else self.absolute.embed(positions)

    def position_limit(self) -> int | None:
        return None if self.absolute is None else self.absolute.position_limit()

    def prepare(self, q_pos: Tensor, k_pos: Tensor) -> RelativeTable:
        distance = q_pos[:, :, None] - k_pos[:, None, :]  # (B, Tq, Tk): i - j
        if self.cfg.buckets:
            distance = log_buckets(distance, self.cfg.buckets, self.cfg.max_distance)
        index = (distance + self.span).clamp(0, 2 * self.span - 1)
        table = self.relative.weight
        if self.norm is not None:
            table = self.norm(table)
        return RelativeTable(index, table)

    def score_bias(self, state: Any, q: Tensor, k: Tensor, scale: float) -> Tensor | None:
        raise ValueError(
            "position 'deberta_relative' is applied by attention 'disentangled' (its terms "
            "project the table with each layer's weights); this attention cannot"
        )
