"""Post-LN block (Vaswani et al., BERT): x = norm(x + sublayer(x)) after each sublayer."""

from __future__ import annotations

from torch import Tensor

from archzoo.interfaces import AttentionContext, Block, NormFactory


class PostLNBlock(Block):
    name = "post_ln"
    summary = "residual then norm after each sublayer (original Transformer, BERT, GPT-1)"

    def make_norms(self, make_norm: NormFactory, *, cross: bool) -> None:
        self.attention_norm = make_norm()
        self.cross_norm = make_norm() if cross else None
        self.ffn_norm = make_norm()

    def forward(
        self,
        x: Tensor,
        self_ctx: AttentionContext,
        memory: Tensor | None = None,
        cross_ctx: AttentionContext | None = None,
    ) -> Tensor:
        x = self.attention_norm(x + self.dropout(self.attention(x, self_ctx)))
        if self.cross_attention is not None:
            x = self.cross_norm(x + self.dropout(self.cross_attention(x, cross_ctx, memory)))
        return self.ffn_norm(x + self.dropout(self.ffn(x)))
