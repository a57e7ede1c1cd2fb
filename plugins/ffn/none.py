"""No feed-forward sublayer: a layer that is its token mixer alone (Mamba, Mamba 2)."""

from __future__ import annotations

from torch import Tensor

from archzoo.parts.interfaces import FeedForward


class NoFeedForward(FeedForward, name="none"):
    """no feed-forward: adds nothing to the residual stream (pair with pre_ln ffn_norm: false)"""

    def forward(self, x: Tensor) -> Tensor:
        return x.new_zeros(()).expand_as(x)  # (B, T, D) of zeros, nothing allocated
