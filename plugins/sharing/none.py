"""No sharing: every layer has its own parameters."""

from __future__ import annotations

from archzoo.parts.interfaces import Sharing


class NoSharing(Sharing, name="none"):
    """every layer has its own parameters"""

    def assign(self, n_layers: int) -> list[int]:
        return list(range(n_layers))
