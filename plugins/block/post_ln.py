"""Post-LN block (Vaswani et al., BERT): x = norm(x + sublayer(x)) after each sublayer."""

from __future__ import annotations

from collections.abc import Callable

from torch import Tensor

from archzoo.parts.component import param
from archzoo.parts.interfaces import AttentionContext, Block


class PostLNBlock(Block, name="post_ln"):
    """residual then norm after each sublayer (original Transformer, BERT, GPT-1)"""

    class Config:
        zero_padded: bool = param(False, "zero the outputs at padded positions (XLM)")

    def finish(self, x: Tensor, self_ctx: AttentionContext) -> Tensor:
        """x, or with zero_padded x with padded query positions set to 0 (as XLM does)."""
        mask = self_ctx.mask
        if not self.cfg.zero_padded or mask.key_padding is None:
            return x
        real = mask.key_padding[:, mask.q_offset : mask.q_offset + mask.q_len]  # (B, T)
        return x * real[..., None].to(x.dtype)

    def residual(self, x: Tensor, part: str, sublayer: Callable[[Tensor], Tensor]) -> Tensor:
        return getattr(self, f"{part}_norm")(x + self.dropout(sublayer(x)))
