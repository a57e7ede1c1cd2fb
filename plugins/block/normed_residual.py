"""Normed-residual block (MiniMax-01): the residual stream carries the normalised input.

x = a * norm(x) + b * sublayer(norm(x)) for each sublayer, a final norm closes the stack.
MiniMax scales the skip by a = (2 L)^(1/4) (DeepNet's alpha) and the sublayer by b; its
attention and lightning layers may each have their own pair (per-layer block overrides).
"""

from __future__ import annotations

from collections.abc import Callable

from torch import Tensor

from archzoo.parts.component import param
from archzoo.parts.interfaces import Block


class NormedResidualBlock(Block, name="normed_residual", final_norm=True):
    """x = a * norm(x) + b * sublayer(norm(x)): the skip carries the normalised input"""

    class Config:
        attention_skip_scale: float = param(
            1.0, "a: multiplies the normalised input skipped around attention (and cross)"
        )
        attention_scale: float = param(1.0, "b: multiplies attention's output (and cross's)")
        ffn_skip_scale: float = param(
            1.0, "a: multiplies the normalised input skipped around the FFN"
        )
        ffn_scale: float = param(1.0, "b: multiplies the FFN's output")

    def residual(self, x: Tensor, part: str, sublayer: Callable[[Tensor], Tensor]) -> Tensor:
        h = getattr(self, f"{part}_norm")(x)
        which = "ffn" if part == "ffn" else "attention"
        skip = getattr(self.cfg, f"{which}_skip_scale")
        scale = getattr(self.cfg, f"{which}_scale")
        return h * skip + self.dropout(sublayer(h)) * scale
