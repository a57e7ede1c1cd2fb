"""Post-LN block (Vaswani et al., BERT): x = norm(x + sublayer(x)) after each sublayer."""

from __future__ import annotations

from collections.abc import Callable

from torch import Tensor

from archzoo.interfaces import Block


class PostLNBlock(Block, name="post_ln"):
    """residual then norm after each sublayer (original Transformer, BERT, GPT-1)"""

    def residual(self, x: Tensor, part: str, sublayer: Callable[[Tensor], Tensor]) -> Tensor:
        return getattr(self, f"{part}_norm")(x + self.dropout(sublayer(x)))
