"""Pre-LN block (GPT-2, Xiong et al., 2020): x = x + sublayer(norm(x)); the stack ends with a norm."""

from __future__ import annotations

from torch import Tensor

from archzoo.component import Capabilities
from archzoo.interfaces import AttentionContext, Block, NormFactory


class PreLNBlock(Block):
    name = "pre_ln"
    summary = "norm before each sublayer, residual around it; a final norm closes the stack"
    capabilities = Capabilities(final_norm=True)

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
        x = x + self.dropout(self.attention(self.attention_norm(x), self_ctx))
        if self.cross_attention is not None:
            x = x + self.dropout(self.cross_attention(self.cross_norm(x), cross_ctx, memory))
        return x + self.dropout(self.ffn(self.ffn_norm(x)))
