"""Layers split into consecutive groups that share parameters (ALBERT's num_hidden_groups)."""

from __future__ import annotations

from archzoo.parts.component import param
from archzoo.parts.interfaces import Sharing


class GroupSharing(Sharing, name="groups"):
    """n_groups parameter sets; consecutive runs of n_layers / n_groups layers share one"""

    class Config:
        n_groups: int = param(1, "number of parameter sets; must divide n_layers", min=1)

    def assign(self, n_layers: int) -> list[int]:
        n_groups = self.cfg.n_groups
        if n_layers % n_groups:
            raise ValueError(
                f"n_groups {n_groups} must divide n_layers {n_layers} "
                "(each group runs the same number of layers)"
            )
        # HF ALBERT's formula, kept float-for-float: int(i / (n_layers / n_groups)).
        return [int(i / (n_layers / n_groups)) for i in range(n_layers)]
