"""Pre-LN block (GPT-2, Xiong et al., 2020): x = x + sublayer(norm(x)); the stack ends with a norm."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from archzoo.parts.component import param
from archzoo.parts.interfaces import AttentionContext, Block, NormFactory


class PreLNBlock(Block, name="pre_ln", final_norm=True):
    """norm before each sublayer, residual around it; a final norm closes the stack"""

    class Config:
        attention_norm: bool = param(True, "a norm before attention (off: ModernBERT's layer 0)")
        residual_scale: float = param(
            1.0,
            "multiply each sublayer's output by this before the residual add "
            "(Granite's residual_multiplier)",
            gt=0.0,
        )
        ffn_norm: bool = param(True, "a norm before the FFN (off: a layer with ffn: none, Mamba's)")
        prefix_attention_norm: bool = param(
            False,
            "the vectors the embedding places before the tokens (its global_tokens) take an "
            "attention norm of their own (PEGASUS-X); the FFN's norm is shared",
        )

    def make_norms(self, make_norm: NormFactory, *, cross: bool) -> None:
        super().make_norms(make_norm, cross=cross)
        if not self.cfg.attention_norm:  # the embedding norm already normalised the input
            self.attention_norm = nn.Identity()
        if not self.cfg.ffn_norm:  # no FFN to normalise for
            self.ffn_norm = nn.Identity()
        self.prefix_norm = make_norm() if self.cfg.prefix_attention_norm else None

    def residual(self, x: Tensor, part: str, sublayer: Callable[[Tensor], Tensor]) -> Tensor:
        out = sublayer(getattr(self, f"{part}_norm")(x))
        if self.cfg.residual_scale != 1.0:
            out = out * self.cfg.residual_scale
        return x + (self.dropout(out) if self.dropout.training else out)  # eval: no call

    def forward(
        self,
        x: Tensor,
        self_ctx: AttentionContext,
        memory: Tensor | None = None,
        cross_ctx: AttentionContext | None = None,
    ) -> Tensor:
        """`Block.forward` through `residual`, written out: most decoders are pre-LN, and a
        decoding step runs this once per layer (no closures, no norm looked up by name). A
        subclass that overrides `residual` gets the generic path."""
        if self.prefix_norm is not None:
            return self._prefixed_forward(x, self_ctx, memory, cross_ctx)
        if type(self).residual is not PreLNBlock.residual or self.cfg.residual_scale != 1.0:
            return super().forward(x, self_ctx, memory, cross_ctx)
        dropout = self.dropout if self.dropout.training else None  # eval: no call
        out = self.attention(self.attention_norm(x), self_ctx)
        x = x + (out if dropout is None else dropout(out))
        if self.cross_attention is not None:
            out = self.cross_attention(self.cross_norm(x), cross_ctx, memory)
            x = x + (out if dropout is None else dropout(out))
        out = self.ffn(self.ffn_norm(x))
        return self.finish(x + (out if dropout is None else dropout(out)), self_ctx)

    def _prefixed_forward(
        self,
        x: Tensor,
        self_ctx: AttentionContext,
        memory: Tensor | None,
        cross_ctx: AttentionContext | None,
    ) -> Tensor:
        """`Block.forward` with the leading `self_ctx.prefix` positions normalised by
        `prefix_norm` before attention, the tokens by `attention_norm`."""
        p = self_ctx.prefix
        normed = torch.cat([self.prefix_norm(x[:, :p]), self.attention_norm(x[:, p:])], dim=1)
        out = self.attention(normed, self_ctx)
        if self.cfg.residual_scale != 1.0:
            out = out * self.cfg.residual_scale
        x = x + (self.dropout(out) if self.dropout.training else out)
        if self.cross_attention is not None:
            x = self.residual(x, "cross", lambda h: self.cross_attention(h, cross_ctx, memory))
        return self.finish(self.residual(x, "ffn", self.ffn), self_ctx)
