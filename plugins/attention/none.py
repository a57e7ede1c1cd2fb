"""No token mixer: a layer that is its FFN alone (Nemotron-H's MLP layers)."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from archzoo.parts.interfaces import Attention, AttentionContext


class NoMixer(Attention, name="none", accepts_bias=False, kv_cache=True):
    """no token mixer: adds nothing to the residual stream (pair with pre_ln attention_norm: false)"""

    @classmethod
    def cross_attention(cls, cfg: Any, dims: Any, **parts: Any) -> Attention:
        """A decoder layer still attends to an encoder, through plain `mha`."""
        from .mha import MultiHeadAttention

        return MultiHeadAttention(
            MultiHeadAttention.Config(), dims, cross=True, make_norm=parts.get("make_norm")
        )

    def state_shapes(self) -> dict[str, tuple[tuple[int, ...], torch.dtype | None]]:
        """Nothing to keep while decoding."""
        return {}

    def attention_flops(self, context: int, causal: bool) -> float:
        return 0.0

    def forward(self, x: Tensor, ctx: AttentionContext, memory: Tensor | None = None) -> Tensor:
        return x.new_zeros(()).expand_as(x)  # (B, T, D) of zeros, nothing allocated
