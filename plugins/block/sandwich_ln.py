"""Sandwich-LN block (Ding et al., CogView): norm before and after each sublayer."""

from __future__ import annotations

from collections.abc import Callable

from torch import Tensor

from archzoo.parts.interfaces import Block, NormFactory


class SandwichLNBlock(Block, name="sandwich_ln", final_norm=True):
    """x = x + norm_out(sublayer(norm_in(x))) for each sublayer; a final norm closes"""

    def make_norms(self, make_norm: NormFactory, *, cross: bool) -> None:
        for part in ("attention", "cross", "ffn") if cross else ("attention", "ffn"):
            setattr(self, f"{part}_norm", make_norm())
            setattr(self, f"{part}_out_norm", make_norm())

    def residual(self, x: Tensor, part: str, sublayer: Callable[[Tensor], Tensor]) -> Tensor:
        h = sublayer(getattr(self, f"{part}_norm")(x))
        return x + self.dropout(getattr(self, f"{part}_out_norm")(h))
