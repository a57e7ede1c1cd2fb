"""Relative position representations (Shaw et al., 2018), clipped at a maximum distance.

e_ij = q_i (k_j + a^K_{clip(j-i)}) * scale and, with the value term,
z_i = sum_j alpha_ij (v_j + a^V_{clip(j-i)}). One table per stack, shared by heads and layers.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch
from torch import Tensor, nn

from archzoo.parts.component import param
from archzoo.parts.interfaces import Position


class RelativePosition(Position, name="relative", bias=True):
    """Shaw et al. clipped relative representations: a key term (and value term)"""

    class Config:
        max_distance: int = param(16, "distances are clipped to [-k, k]", min=1, max=65536)
        value_term: bool = param(False, "also add a^V to the attended values")

    def __init__(self, cfg: Any, dims: Any, *, causal: bool = False) -> None:
        super().__init__(cfg, dims, causal=causal)
        n = 2 * cfg.max_distance + 1
        self.key_table = nn.Embedding(n, dims.head_dim)
        self.value_table = nn.Embedding(n, dims.head_dim) if cfg.value_term else None
        if cfg.value_term:  # this instance also acts on values
            self.capabilities = replace(self.capabilities, values=True)

    def prepare(self, q_pos: Tensor, k_pos: Tensor) -> Tensor:
        k = self.cfg.max_distance
        rel = (k_pos[:, None, :] - q_pos[:, :, None]).clamp(-k, k) + k  # (B, Tq, Tk)
        return rel

    def score_bias(self, state: Any, q: Tensor, k: Tensor, scale: float) -> Tensor:
        # q (B, H, Tq, hd) . a^K (2k+1, hd) -> (B, H, Tq, 2k+1), then pick each pair's distance
        per_distance = q @ self.key_table.weight.to(q.dtype).t()
        index = state[:, None].expand(q.shape[0], q.shape[1], *state.shape[1:])  # (B, H, Tq, Tk)
        return torch.gather(per_distance, -1, index) * scale

    def value_bias(self, state: Tensor, probs: Tensor) -> Tensor:
        """sum_j alpha_ij a^V_{rel(i,j)}: probs (B, H, Tq, Tk) -> (B, H, Tq, hd)."""
        n = self.value_table.weight.shape[0]
        index = state[:, None].expand_as(probs)  # (B, H, Tq, Tk)
        per_distance = probs.new_zeros(*probs.shape[:-1], n).scatter_add_(-1, index, probs)
        return per_distance @ self.value_table.weight.to(probs.dtype)  # (B, H, Tq, hd)
