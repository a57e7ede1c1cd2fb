"""No position information (a bag of tokens, or order from the attention pattern alone)."""

from __future__ import annotations

from typing import Any

from archzoo.interfaces import Position


class NoPosition(Position):
    name = "none"
    summary = "no position information at all"

    def __init__(self, cfg: Any, dims: Any, *, causal: bool = False) -> None:
        super().__init__(cfg, dims)
