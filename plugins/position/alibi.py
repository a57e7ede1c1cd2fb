"""ALiBi (Press et al., 2022): a per-head linear penalty on query-key distance."""

from __future__ import annotations

import math
from typing import Any, Literal

import torch
from torch import Tensor

from archzoo.parts.component import param
from archzoo.parts.interfaces import Position


def alibi_slopes(n_heads: int) -> list[float]:
    """Press et al.'s slopes: geometric from 2^(-8/n); non-powers of two interleave 2n's."""

    def power_of_two(n: int) -> list[float]:
        start = 2.0 ** (-8.0 / n)
        return [start ** (i + 1) for i in range(n)]

    if math.log2(n_heads).is_integer():
        return power_of_two(n_heads)
    closest = 2 ** math.floor(math.log2(n_heads))
    return power_of_two(closest) + power_of_two(2 * closest)[0::2][: n_heads - closest]


def alibi_slopes_fp32(n_heads: int) -> Tensor:
    """The same slopes raised to their powers in float32, as BLOOM computes them (from 16
    heads on, some differ from `alibi_slopes` in the last float32 bit): (H,)."""
    closest = 2 ** math.floor(math.log2(n_heads))
    base = torch.tensor(2.0 ** (-8.0 / closest), dtype=torch.float32)
    slopes = torch.pow(base, torch.arange(1, closest + 1, dtype=torch.int32))
    if closest == n_heads:
        return slopes
    extra = torch.tensor(2.0 ** (-4.0 / closest), dtype=torch.float32)
    odd = torch.arange(1, 1 + 2 * (n_heads - closest), 2, dtype=torch.int32)
    return torch.cat([slopes, torch.pow(extra, odd)])


class AlibiPosition(Position, name="alibi", bias=True):
    """no embeddings; subtract slope_h * |i - j| from the attention scores"""

    class Config:
        scaled: bool = param(
            False, "multiply the bias by the score scale, as Falcon adds it before scaling"
        )
        form: Literal["distance", "key", "key_bf16"] = param(
            "distance",
            "distance: -slope_h * |i - j| in float32; by key position alone (under a causal "
            "mask the same softmax): key, BLOOM's float32 slope_h * j rounded to the scores' "
            "dtype; key_bf16, Falcon's bfloat16(bfloat16(slope_h) * j) in any dtype",
        )

    def __init__(self, cfg: Any, dims: Any, *, causal: bool = False) -> None:
        super().__init__(cfg, dims, causal=causal)
        if cfg.form != "distance" and not causal:
            raise ValueError(
                f"position alibi form {cfg.form!r} adds slope * key position, the same softmax "
                "as by distance only under a causal mask; this stack attends both ways: use "
                "form 'distance'"
            )

    def prepare(self, q_pos: Tensor, k_pos: Tensor) -> Tensor:
        if self.cfg.form == "key":  # float32 slopes times key positions: (B, H, 1, Tk)
            slopes = alibi_slopes_fp32(self.dims.n_heads).to(q_pos.device)
            return slopes[None, :, None, None] * k_pos[:, None, None, :]
        slopes = torch.tensor(alibi_slopes(self.dims.n_heads), device=q_pos.device)
        if self.cfg.form == "key_bf16":  # bf16 slopes times key positions, rounded: (B, H, 1, Tk)
            return slopes.bfloat16()[None, :, None, None] * k_pos[:, None, None, :]
        dist = (q_pos[:, :, None] - k_pos[:, None, :]).abs().to(torch.float32)  # (B, Tq, Tk)
        return -slopes[None, :, None, None] * dist[:, None]  # (B, H, Tq, Tk)

    def score_bias(self, state: Any, q: Tensor, k: Tensor, scale: float) -> Tensor:
        if self.cfg.form != "distance":  # scaled in the scores' dtype, as Falcon divides
            bias = state.to(q.dtype)
            bias = bias / (1.0 / scale) if self.cfg.scaled else bias
            return bias.expand(-1, -1, q.shape[2], -1)  # (B, H, Tq, Tk)
        return state * scale if self.cfg.scaled else state
