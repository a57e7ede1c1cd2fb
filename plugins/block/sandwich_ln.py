"""Sandwich-LN block (Ding et al., CogView): norm before and after each sublayer."""

from __future__ import annotations

from torch import Tensor

from archzoo.component import Capabilities
from archzoo.interfaces import AttentionContext, Block, NormFactory


class SandwichLNBlock(Block):
    name = "sandwich_ln"
    summary = "x = x + norm_out(sublayer(norm_in(x))) for each sublayer; a final norm closes"
    capabilities = Capabilities(final_norm=True)

    def make_norms(self, make_norm: NormFactory, *, cross: bool) -> None:
        self.attention_norm = make_norm()
        self.attention_out_norm = make_norm()
        if cross:
            self.cross_norm = make_norm()
            self.cross_out_norm = make_norm()
        self.ffn_norm = make_norm()
        self.ffn_out_norm = make_norm()

    def forward(
        self,
        x: Tensor,
        self_ctx: AttentionContext,
        memory: Tensor | None = None,
        cross_ctx: AttentionContext | None = None,
    ) -> Tensor:
        x = x + self.dropout(
            self.attention_out_norm(self.attention(self.attention_norm(x), self_ctx))
        )
        if self.cross_attention is not None:
            h = self.cross_attention(self.cross_norm(x), cross_ctx, memory)
            x = x + self.dropout(self.cross_out_norm(h))
        return x + self.dropout(self.ffn_out_norm(self.ffn(self.ffn_norm(x))))
