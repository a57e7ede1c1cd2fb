"""Residual post-norm block (Swin v2; OLMo 2): each sublayer's output is normalised before the add."""

from __future__ import annotations

from collections.abc import Callable

from torch import Tensor

from archzoo.parts.interfaces import Block


class ResPostLNBlock(Block, name="res_post_ln", final_norm=True):
    """x = x + norm(sublayer(x)) for each sublayer (no input norm); a final norm closes"""

    def residual(self, x: Tensor, part: str, sublayer: Callable[[Tensor], Tensor]) -> Tensor:
        return x + self.dropout(getattr(self, f"{part}_norm")(sublayer(x)))
