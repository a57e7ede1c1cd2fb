"""Pre-LN block (GPT-2, Xiong et al., 2020): x = x + sublayer(norm(x)); the stack ends with a norm."""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from archzoo.component import Capabilities
from archzoo.interfaces import AttentionContext, Block, NormFactory


class PreLNBlock(Block):
    name = "pre_ln"
    summary = "norm before each sublayer, residual around it; a final norm closes the stack"
    capabilities = Capabilities(final_norm=True)

    def __init__(
        self,
        cfg: Any,
        dims: Any,
        *,
        attention: nn.Module,
        ffn: nn.Module,
        make_norm: NormFactory,
        cross_attention: nn.Module | None = None,
    ) -> None:
        super().__init__(cfg, dims)
        self.attention_norm = make_norm()
        self.attention = attention
        self.cross_norm = make_norm() if cross_attention is not None else None
        self.cross_attention = cross_attention
        self.ffn_norm = make_norm()
        self.ffn = ffn
        self.dropout = nn.Dropout(dims.dropout)

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
