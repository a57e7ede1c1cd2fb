"""T5's relative attention bias (Raffel et al., 2020): a learned scalar per head and bucket."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import torch
from torch import Tensor, nn

from archzoo.parts.component import param
from archzoo.parts.interfaces import Position

from .counting import CountedPositions, count_param
from .learned import LearnedPosition


def t5_buckets(
    distance: Tensor, *, bidirectional: bool, n_buckets: int, max_distance: int
) -> Tensor:
    """Bucket of each key-minus-query distance: exact for short ones, log-spaced up to max."""
    out = torch.zeros_like(distance)
    if bidirectional:
        n_buckets //= 2
        out = out + (distance > 0).long() * n_buckets  # keys after the query use the upper half
        n = distance.abs()
    else:
        n = (-distance).clamp_min(0)  # only keys before the query carry distance
    exact = n_buckets // 2
    log_ratio = torch.log(n.float().clamp_min(1) / exact) / math.log(max_distance / exact)
    far = exact + (log_ratio * (n_buckets - exact)).long()
    far = far.clamp_max(n_buckets - 1)
    return out + torch.where(n < exact, n, far)


class T5RelativePosition(CountedPositions, Position, name="t5_relative", bias=True, embed=True):
    """T5 bucketed relative bias: one learned scalar per head and distance bucket"""

    class Config:
        n_buckets: int = param(32, "number of distance buckets", min=2, max=65536)
        max_distance: int = param(128, "distances beyond this share the last bucket", min=2)
        per_layer: bool = param(False, "one table per layer (UMT5) instead of one per stack")
        absolute: bool = param(
            False, "also add a learned vector per position to the embeddings (MPNet)"
        )
        offset: int = param(0, "absolute: added to every position id (MPNet: 2)", min=0)
        count: str = count_param()  # distances between real tokens are the same either way

    def __init__(self, cfg: Any, dims: Any, *, causal: bool = False) -> None:
        super().__init__(cfg, dims, causal=causal)
        self.absolute = None
        if cfg.absolute:
            table = LearnedPosition.Config(offset=cfg.offset, count=cfg.count)
            self.absolute = LearnedPosition(table, dims)
        else:  # this instance adds nothing to the embeddings
            self.capabilities = replace(self.capabilities, embed=False)
        self.per_layer = cfg.per_layer
        if cfg.per_layer:
            n = dims.n_layers
            self.tables = nn.ModuleList(nn.Embedding(cfg.n_buckets, dims.n_heads) for _ in range(n))
        else:
            self.table = nn.Embedding(cfg.n_buckets, dims.n_heads)

    @classmethod
    def check(cls, cfg: Any, dims: Any) -> list[tuple[str, str]]:
        if cfg.absolute:
            return LearnedPosition.check(cfg, dims)  # its count and offset
        if cfg.offset or cfg.count != "index":
            return [("absolute", "offset and count number the absolute vectors: set it")]
        return []

    def embed(self, positions: Tensor) -> Tensor | None:
        return None if self.absolute is None else self.absolute.embed(positions)

    def position_limit(self) -> int | None:
        return None if self.absolute is None else self.absolute.position_limit()

    def prepare(self, q_pos: Tensor, k_pos: Tensor) -> Tensor:
        if self.cfg.count == "tokens":  # counted ids number the vectors; distances by index
            k_pos = torch.arange(k_pos.shape[1], device=k_pos.device).expand_as(k_pos)
            q_pos = k_pos[:, k_pos.shape[1] - q_pos.shape[1] :]  # (B, Tq): the last Tq
        distance = k_pos[:, None, :] - q_pos[:, :, None]  # (B, Tq, Tk)
        buckets = t5_buckets(
            distance,
            bidirectional=not self.causal,
            n_buckets=self.cfg.n_buckets,
            max_distance=self.cfg.max_distance,
        )
        if self.per_layer:
            return buckets  # each layer looks its own table up in layer_state
        return self.table(buckets).permute(0, 3, 1, 2)  # (B, H, Tq, Tk)

    def layer_state(self, state: Tensor, layer: int) -> Tensor:
        return self.tables[layer](state).permute(0, 3, 1, 2)  # (B, H, Tq, Tk)

    def score_bias(self, state: Any, q: Tensor, k: Tensor, scale: float) -> Tensor:
        return state
