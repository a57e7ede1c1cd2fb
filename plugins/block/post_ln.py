"""Post-LN block (Vaswani et al., BERT): x = norm(x + sublayer(x)) after each sublayer."""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from archzoo.interfaces import AttentionContext, Block, NormFactory


class PostLNBlock(Block):
    name = "post_ln"
    summary = "residual then norm after each sublayer (original Transformer, BERT, GPT-1)"

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
        self.attention = attention
        self.attention_norm = make_norm()
        self.cross_attention = cross_attention
        self.cross_norm = make_norm() if cross_attention is not None else None
        self.ffn = ffn
        self.ffn_norm = make_norm()
        self.dropout = nn.Dropout(dims.dropout)

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
