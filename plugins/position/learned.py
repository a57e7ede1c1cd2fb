"""Learned absolute position embeddings (BERT, GPT)."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from archzoo.parts.component import param
from archzoo.parts.input_checks import values_trusted
from archzoo.parts.interfaces import Position

from .counting import CountedPositions, count_param


class LearnedPosition(CountedPositions, Position, name="learned", embed=True):
    """a trained vector per position, added to the token embeddings"""

    class Config:
        offset: int = param(0, "added to every position id (RoBERTa: padding_idx + 1)", min=0)
        count: str = count_param()  # pads (-1) read row offset - 1: HF's padding_idx row

    @classmethod
    def check(cls, cfg: Any, dims: Any) -> list[tuple[str, str]]:
        problems = cls.count_problems(cfg, dims)
        if cfg.count == "tokens" and cfg.offset < 1:
            problems.append(("offset", "count: tokens reads pads at row offset - 1: offset >= 1"))
        return problems

    def __init__(self, cfg: Any, dims: Any, *, causal: bool = False) -> None:
        super().__init__(cfg, dims, causal=causal)
        self.table = nn.Embedding(dims.max_len + cfg.offset, dims.d_model)

    def position_limit(self) -> int:
        return self.dims.max_len

    def embed(self, positions: Tensor) -> Tensor:
        if (
            not torch.compiler.is_compiling()
            and not values_trusted()  # generation checked its lengths before the first step
            and positions.device.type != "meta"
            and positions.numel()
            and int(positions.max()) >= self.dims.max_len
        ):
            raise ValueError(
                f"position {int(positions.max())} is beyond max_len {self.dims.max_len} "
                "of the learned position table"
            )
        offset = self.cfg.offset
        return self.table(positions + offset if offset else positions)  # no add kernel for 0
