"""Learned absolute position embeddings (BERT, GPT)."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from archzoo.component import param
from archzoo.interfaces import Position


class LearnedPosition(Position, name="learned", embed=True):
    """a trained vector per position, added to the token embeddings"""

    class Config:
        offset: int = param(0, "added to every position id (RoBERTa: padding_idx + 1)", min=0)

    def __init__(self, cfg: Any, dims: Any, *, causal: bool = False) -> None:
        super().__init__(cfg, dims, causal=causal)
        self.table = nn.Embedding(dims.max_len + cfg.offset, dims.d_model)

    def position_limit(self) -> int:
        return self.dims.max_len

    def embed(self, positions: Tensor) -> Tensor:
        if (
            not torch.compiler.is_compiling()
            and positions.device.type != "meta"
            and positions.numel()
            and int(positions.max()) >= self.dims.max_len
        ):
            raise ValueError(
                f"position {int(positions.max())} is beyond max_len {self.dims.max_len} "
                "of the learned position table"
            )
        return self.table(positions + self.cfg.offset)
