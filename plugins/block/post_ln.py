"""Post-LN block (Vaswani et al., BERT): x = norm(x + sublayer(x)) after each sublayer,
optionally with language adapters after the FFN's (X-MOD)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import torch
from torch import Tensor

from archzoo.parts.component import param
from archzoo.parts.interfaces import AttentionContext, Block

from .language_adapters import LanguageAdapters

LANG_IDS = "lang_ids"


class PostLNBlock(Block, name="post_ln"):
    """residual then norm after each sublayer (original Transformer, BERT, GPT-1)"""

    class Config:
        zero_padded: bool = param(False, "zero the outputs at padded positions (XLM)")
        languages: list[str] = param(
            [],
            "one bottleneck adapter per language after the FFN's residual, chosen per row "
            "or token by the `lang_ids` input (ids in this list's order; X-MOD)",
        )
        default_language: int | None = param(
            None, "the language id when no lang_ids are given (null: they are required)", min=0
        )
        adapter_dim: int | None = param(
            None, "the adapters' bottleneck width (null: d_model // 2)", min=1
        )
        adapter_activation: Literal["relu", "gelu", "gelu_tanh", "gelu_new", "silu"] = param(
            "gelu", "the adapters' non-linearity"
        )
        adapter_norm: Literal["ffn", "own", "none"] = param(
            "ffn",
            "the norm the FFN's residual sum passes before the adapters: the FFN's own "
            "norm (applied again after the adapters), one of its own, or none",
        )
        adapter_residual: Literal["normed", "sum"] = param(
            "normed", "what the adapters' output is added to: their normed input, or the sum"
        )

    def __init__(self, cfg: Any, dims: Any, **parts: Any) -> None:
        super().__init__(cfg, dims, **parts)
        self.adapters = self.adapter_norm = None
        if cfg.languages:
            from archzoo.plugins.ffn.activations import ACTIVATIONS

            width = cfg.adapter_dim or dims.d_model // 2
            act = ACTIVATIONS[cfg.adapter_activation]
            self.adapters = LanguageAdapters(len(cfg.languages), dims.d_model, width, act)
            self.inputs = (LANG_IDS,)  # a keyword of the model's forward
            if cfg.adapter_norm == "own":
                self.adapter_norm = parts["make_norm"]()

    @classmethod
    def check(cls, cfg: Any, dims: Any) -> list[tuple[str, str]]:
        n = len(cfg.languages)
        if cfg.default_language is not None and cfg.default_language >= n:
            return [("default_language", f"{cfg.default_language} is not below {n} languages")]
        return []

    def forward(
        self,
        x: Tensor,
        self_ctx: AttentionContext,
        memory: Tensor | None = None,
        cross_ctx: AttentionContext | None = None,
    ) -> Tensor:
        if self.adapters is None:
            return super().forward(x, self_ctx, memory, cross_ctx)
        x = self.residual(x, "attention", lambda h: self.attention(h, self_ctx))
        if self.cross_attention is not None:
            x = self.residual(x, "cross", lambda h: self.cross_attention(h, cross_ctx, memory))
        s = x + self.dropout(self.ffn(x))  # the FFN's residual sum, not yet normed
        normed = {"ffn": self.ffn_norm, "own": self.adapter_norm, "none": None}
        norm = normed[self.cfg.adapter_norm]
        h = s if norm is None else norm(s)
        base = h if self.cfg.adapter_residual == "normed" else s
        out = self.ffn_norm(base + self.dropout(self.adapters(h, self._lang_ids(self_ctx, x))))
        return self.finish(out, self_ctx)

    def _lang_ids(self, ctx: AttentionContext, x: Tensor) -> Tensor:
        ids = ctx.inputs.get(LANG_IDS)
        if ids is not None:
            return ids
        if self.cfg.default_language is None:
            raise ValueError(
                "this model's language adapters need lang_ids (a language id per row or "
                "token), and block.default_language is not set"
            )
        return x.new_full((x.shape[0],), self.cfg.default_language, dtype=torch.long)

    def finish(self, x: Tensor, self_ctx: AttentionContext) -> Tensor:
        """x, or with zero_padded x with padded query positions set to 0 (as XLM does)."""
        mask = self_ctx.mask
        if not self.cfg.zero_padded or mask.key_padding is None:
            return x
        real = mask.key_padding[:, mask.q_offset : mask.q_offset + mask.q_len]  # (B, T)
        return x * real[..., None].to(x.dtype)

    def residual(self, x: Tensor, part: str, sublayer: Callable[[Tensor], Tensor]) -> Tensor:
        return getattr(self, f"{part}_norm")(x + self.dropout(sublayer(x)))
