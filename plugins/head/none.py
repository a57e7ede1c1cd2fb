"""No task head: the model returns hidden states (and BERT's pooler output, when it has one)."""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from archzoo.parts.component import param
from archzoo.parts.interfaces import Head


class NoHead(Head, name="none", mup=True):
    """no task head; outputs are the last hidden states (and an optional pooler output)"""

    class Config:
        pooler: bool = param(
            False, "dense + tanh on the first token, returned as pooler_output (BERT's pooler)"
        )
        project: int | None = param(
            None,
            "project the last hidden states to this width, bias-free (OPT-350m's project_out)",
            min=1,
        )

    def __init__(self, cfg: Any, dims: Any, **parts: Any) -> None:
        super().__init__(cfg, dims)
        self.pooler = nn.Linear(dims.d_model, dims.d_model) if cfg.pooler else None
        project = getattr(cfg, "project", None)  # subclasses with a Config of their own
        self.down = nn.Linear(dims.d_model, project, bias=False) if project else None

    def forward(
        self, hidden: Tensor, attention_mask: Tensor | None = None
    ) -> dict[str, Tensor] | None:
        out = {}
        if self.pooler is not None:
            out["pooler_output"] = self.pooler(hidden[:, 0]).tanh()  # (B, D)
        if self.down is not None:
            out["last_hidden_state"] = self.down(hidden)  # (B, T, project)
        return out or None
