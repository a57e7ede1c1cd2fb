"""No task head: the model returns hidden states (and BERT's pooler output, when it has one)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torch import Tensor, nn

from archzoo.component import param
from archzoo.interfaces import Head


class NoHead(Head):
    name = "none"
    summary = "no task head; outputs are the last hidden states (and an optional pooler output)"

    @dataclass
    class Config:
        pooler: bool = param(
            False, "dense + tanh on the first token, returned as pooler_output (BERT's pooler)"
        )

    def __init__(self, cfg: Any, dims: Any, **parts: Any) -> None:
        super().__init__(cfg, dims)
        self.pooler = nn.Linear(dims.d_model, dims.d_model) if cfg.pooler else None

    def forward(
        self, hidden: Tensor, attention_mask: Tensor | None = None
    ) -> dict[str, Tensor] | None:
        if self.pooler is None:
            return None
        return {"pooler_output": self.pooler(hidden[:, 0]).tanh()}  # (B, D)
