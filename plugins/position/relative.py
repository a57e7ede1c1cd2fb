"""Relative position representations (Shaw et al., 2018), clipped at a maximum distance.

e_ij = q_i (k_j + a^K_{clip(j-i)}) * scale and, with the value term,
z_i = sum_j alpha_ij (v_j + a^V_{clip(j-i)}). One table per stack, shared by heads and
layers, or one per layer (`per_layer`, BERT's `relative_key`); `key_term` adds
k_j . a^K_{clip(j-i)} too (BERT's `relative_key_query`, Huang et al., 2020).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import Tensor, nn

from archzoo.parts.component import param
from archzoo.parts.interfaces import Position


@dataclass
class Distances:
    """What one layer's attention gets: each pair's table row and that layer's tables."""

    index: Tensor  # (B, Tq, Tk) long: the row clip(j - i) + k
    key: Tensor  # (2k+1, hd) a^K
    value: Tensor | None  # (2k+1, hd) a^V, with the value term


class RelativePosition(Position, name="relative", bias=True):
    """Shaw et al. clipped relative representations: a key term (and value term)"""

    class Config:
        max_distance: int = param(16, "distances are clipped to [-k, k]", min=1, max=65536)
        value_term: bool = param(False, "also add a^V to the attended values")
        per_layer: bool = param(
            False, "one table per layer (BERT relative_key) instead of one per stack"
        )
        key_term: bool = param(
            False, "also add k_j . a^K (the key's term: BERT relative_key_query)"
        )

    def __init__(self, cfg: Any, dims: Any, *, causal: bool = False) -> None:
        super().__init__(cfg, dims, causal=causal)
        n = 2 * cfg.max_distance + 1
        if cfg.per_layer:
            self.per_layer = True  # each layer looks its own tables up in layer_state
            layers = range(dims.n_layers)
            self.key_tables = nn.ModuleList(nn.Embedding(n, dims.head_dim) for _ in layers)
            self.value_tables = (
                nn.ModuleList(nn.Embedding(n, dims.head_dim) for _ in layers)
                if cfg.value_term
                else None
            )
        else:
            self.key_table = nn.Embedding(n, dims.head_dim)
            self.value_table = nn.Embedding(n, dims.head_dim) if cfg.value_term else None
        if cfg.value_term:  # this instance also acts on values
            self.capabilities = replace(self.capabilities, values=True)

    def prepare(self, q_pos: Tensor, k_pos: Tensor) -> Tensor | Distances:
        k = self.cfg.max_distance
        rel = (k_pos[:, None, :] - q_pos[:, :, None]).clamp(-k, k) + k  # (B, Tq, Tk)
        if self.cfg.per_layer:
            return rel  # layer_state adds each layer's tables
        value = self.value_table.weight if self.value_table is not None else None
        return Distances(rel, self.key_table.weight, value)

    def layer_state(self, state: Tensor, layer: int) -> Distances:
        value = self.value_tables[layer].weight if self.value_tables is not None else None
        return Distances(state, self.key_tables[layer].weight, value)

    def score_bias(self, state: Distances, q: Tensor, k: Tensor, scale: float) -> Tensor:
        # q (B, H, Tq, hd) . a^K (2k+1, hd) -> (B, H, Tq, 2k+1), then pick each pair's distance
        table = state.key.to(q.dtype)
        per_distance = q @ table.t()
        index = state.index[:, None].expand(q.shape[0], q.shape[1], *state.index.shape[1:])
        bias = torch.gather(per_distance, -1, index)  # (B, H, Tq, Tk)
        if self.cfg.key_term:
            # k (B, Hkv, Tk, hd) . a^K -> (B, Hkv, Tk, 2k+1); key j picks row (i, j) per query
            keyed = k @ table.t()
            by_key = state.index.transpose(1, 2)[:, None]  # (B, 1, Tk, Tq)
            by_key = by_key.expand(k.shape[0], k.shape[1], *by_key.shape[2:])
            term = torch.gather(keyed, -1, by_key).transpose(-1, -2)  # (B, Hkv, Tq, Tk)
            bias = bias + term.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
        return bias * scale

    def value_bias(self, state: Distances, probs: Tensor) -> Tensor:
        """sum_j alpha_ij a^V_{rel(i,j)}: probs (B, H, Tq, Tk) -> (B, H, Tq, hd)."""
        table = state.value.to(probs.dtype)
        index = state.index[:, None].expand_as(probs)  # (B, H, Tq, Tk)
        per_distance = probs.new_zeros(*probs.shape[:-1], table.shape[0])
        per_distance.scatter_add_(-1, index, probs)
        return per_distance @ table  # (B, H, Tq, hd)
