"""ALiBi (Press et al., 2022): a per-head linear penalty on query-key distance."""

from __future__ import annotations

import math
from typing import Any, Literal

import torch
from torch import Tensor

from archzoo.component import param
from archzoo.interfaces import Position


def alibi_slopes(n_heads: int) -> list[float]:
    """Press et al.'s slopes: geometric from 2^(-8/n); non-powers of two interleave 2n's."""

    def power_of_two(n: int) -> list[float]:
        start = 2.0 ** (-8.0 / n)
        return [start ** (i + 1) for i in range(n)]

    if math.log2(n_heads).is_integer():
        return power_of_two(n_heads)
    closest = 2 ** math.floor(math.log2(n_heads))
    return power_of_two(closest) + power_of_two(2 * closest)[0::2][: n_heads - closest]


class AlibiPosition(Position, name="alibi", bias=True):
    """no embeddings; subtract slope_h * |i - j| from the attention scores"""

    class Config:
        scaled: bool = param(
            False, "multiply the bias by the score scale, as Falcon adds it before scaling"
        )
        form: Literal["distance", "key_bf16"] = param(
            "distance",
            "distance: -slope_h * |i - j| in float32; key_bf16: Falcon's bfloat16(bfloat16(slope_h)"
            " * j) by key position alone (under a causal mask the same softmax), in any dtype",
        )

    def prepare(self, q_pos: Tensor, k_pos: Tensor) -> Tensor:
        slopes = torch.tensor(alibi_slopes(self.dims.n_heads), device=q_pos.device)
        if self.cfg.form == "key_bf16":  # bf16 slopes times key positions, rounded: (B, H, 1, Tk)
            return slopes.bfloat16()[None, :, None, None] * k_pos[:, None, None, :]
        dist = (q_pos[:, :, None] - k_pos[:, None, :]).abs().to(torch.float32)  # (B, Tq, Tk)
        return -slopes[None, :, None, None] * dist[:, None]  # (B, H, Tq, Tk)

    def score_bias(self, state: Any, q: Tensor, k: Tensor, scale: float) -> Tensor:
        if self.cfg.form == "key_bf16":  # scaled in the scores' dtype, as Falcon divides
            bias = state.to(q.dtype)
            bias = bias / (1.0 / scale) if self.cfg.scaled else bias
            return bias.expand(-1, -1, q.shape[2], -1)  # (B, H, Tq, Tk)
        return state * scale if self.cfg.scaled else state
