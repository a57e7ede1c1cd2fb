"""T5's relative attention bias (Raffel et al., 2020): a learned scalar per head and bucket."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn

from archzoo.parts.component import param
from archzoo.parts.interfaces import Position


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


class T5RelativePosition(Position, name="t5_relative", bias=True):
    """T5 bucketed relative bias: one learned scalar per head and distance bucket"""

    class Config:
        n_buckets: int = param(32, "number of distance buckets", min=2, max=65536)
        max_distance: int = param(128, "distances beyond this share the last bucket", min=2)
        per_layer: bool = param(False, "one table per layer (UMT5) instead of one per stack")

    def __init__(self, cfg: Any, dims: Any, *, causal: bool = False) -> None:
        super().__init__(cfg, dims, causal=causal)
        self.per_layer = cfg.per_layer
        if cfg.per_layer:
            n = dims.n_layers
            self.tables = nn.ModuleList(nn.Embedding(cfg.n_buckets, dims.n_heads) for _ in range(n))
        else:
            self.table = nn.Embedding(cfg.n_buckets, dims.n_heads)

    def prepare(self, q_pos: Tensor, k_pos: Tensor) -> Tensor:
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
