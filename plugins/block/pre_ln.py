"""Pre-LN block (GPT-2, Xiong et al., 2020): x = x + sublayer(norm(x)); the stack ends with a norm."""

from __future__ import annotations

from collections.abc import Callable

from torch import Tensor

from archzoo.interfaces import Block


class PreLNBlock(Block, name="pre_ln", final_norm=True):
    """norm before each sublayer, residual around it; a final norm closes the stack"""

    def residual(self, x: Tensor, part: str, sublayer: Callable[[Tensor], Tensor]) -> Tensor:
        return x + self.dropout(sublayer(getattr(self, f"{part}_norm")(x)))
