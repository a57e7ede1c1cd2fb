"""Sandwich-LN block (Ding et al., CogView): norm before and after each sublayer."""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from archzoo.component import Capabilities
from archzoo.interfaces import AttentionContext, Block, NormFactory


class SandwichLNBlock(Block):
    name = "sandwich_ln"
    summary = "x = x + norm_out(sublayer(norm_in(x))) for each sublayer; a final norm closes"
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
        self.attention_out_norm = make_norm()
        self.cross_attention = cross_attention
        if cross_attention is not None:
            self.cross_norm = make_norm()
            self.cross_out_norm = make_norm()
        self.ffn_norm = make_norm()
        self.ffn = ffn
        self.ffn_out_norm = make_norm()
        self.dropout = nn.Dropout(dims.dropout)

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
