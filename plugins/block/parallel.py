"""Parallel block (GPT-J, GPT-NeoX): x = x + attn(norm1(x)) + ffn(norm2(x)); in 16-bit floats
the order of the two additions is a family's own (`branches_first`)."""

from __future__ import annotations

from torch import Tensor

from archzoo.parts.component import param
from archzoo.parts.interfaces import AttentionContext, Block, NormFactory


class ParallelBlock(Block, name="parallel", final_norm=True):
    """attention and FFN read the same input and add to one residual (GPT-J, GPT-NeoX)"""

    class Config:
        shared_norm: bool = param(False, "one norm feeds both branches (GPT-J) instead of two")
        branches_first: bool = param(
            False,
            "sum the branches, then the residual, (attn + ffn) + x, as GPT-J, GPT-NeoX and Falcon "
            "round it, instead of (x + attn) + ffn",
        )

    def make_norms(self, make_norm: NormFactory, *, cross: bool) -> None:
        super().make_norms(make_norm, cross=cross)
        if self.cfg.shared_norm:  # GPT-J: the attention norm feeds the FFN too
            self.ffn_norm = None

    def forward(
        self,
        x: Tensor,
        self_ctx: AttentionContext,
        memory: Tensor | None = None,
        cross_ctx: AttentionContext | None = None,
    ) -> Tensor:
        h = self.attention_norm(x)
        attn = self.dropout(self.attention(h, self_ctx))
        if self.cross_attention is not None:
            attn = attn + self.dropout(self.cross_attention(self.cross_norm(x), cross_ctx, memory))
        ffn_in = h if self.ffn_norm is None else self.ffn_norm(x)
        ffn = self.dropout(self.ffn(ffn_in))
        return (attn + ffn) + x if self.cfg.branches_first else (x + attn) + ffn
