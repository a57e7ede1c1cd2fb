"""No head: the model returns hidden states only."""

from __future__ import annotations

from typing import Any

from archzoo.interfaces import Head


class NoHead(Head):
    name = "none"
    summary = "no task head; outputs are the last hidden states"

    def __init__(self, cfg: Any, dims: Any, **parts: Any) -> None:
        super().__init__(cfg, dims)
