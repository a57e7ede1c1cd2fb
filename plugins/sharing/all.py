"""All layers share one set of parameters (ALBERT's cross-layer sharing)."""

from __future__ import annotations

from archzoo.parts.interfaces import Sharing


class AllSharing(Sharing, name="all"):
    """every layer runs the same block: one layer's parameters, n_layers applications"""

    def assign(self, n_layers: int) -> list[int]:
        return [0] * n_layers
