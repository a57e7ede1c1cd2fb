"""Sandwich-LN block (Ding et al., CogView): norm before and after each sublayer."""

from __future__ import annotations

from collections.abc import Callable

from torch import Tensor

from archzoo.parts.component import param
from archzoo.parts.interfaces import Block, NormFactory


class SandwichLNBlock(Block, name="sandwich_ln", final_norm=True):
    """x = x + norm_out(sublayer(norm_in(x))) for each sublayer; a final norm closes"""

    class Config:
        residual_scale: float = param(
            1.0,
            "multiply each sublayer's normalised output by this before the residual add "
            "(HyperCLOVA X's residual_multiplier)",
            gt=0.0,
        )

    def make_norms(self, make_norm: NormFactory, *, cross: bool) -> None:
        for part in ("attention", "cross", "ffn") if cross else ("attention", "ffn"):
            setattr(self, f"{part}_norm", make_norm())
            setattr(self, f"{part}_out_norm", make_norm())

    def residual(self, x: Tensor, part: str, sublayer: Callable[[Tensor], Tensor]) -> Tensor:
        h = getattr(self, f"{part}_out_norm")(sublayer(getattr(self, f"{part}_norm")(x)))
        if self.cfg.residual_scale != 1.0:
            h = h * self.cfg.residual_scale
        return x + self.dropout(h)
