"""QK-norm attention (Dehghani et al., 2023; OLMo 2, Qwen3): each head's queries and keys
pass through a norm before the dot product, which keeps the attention logits bounded.

Written only against archzoo's documented attention contract (docs/plugins.md,
"Attention contract"): the norm is the spec's `norm:` component, made at width head_dim by
the factory the builder hands over; the layer supplies its projections and the attention
template (archzoo.parts.attention_template) rotates, caches, adds the score bias and runs the
kernel the user chose (attention_impl=).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torch import Tensor, nn

from archzoo import Capabilities, param
from archzoo.parts.attention_template import AttentionTemplate
from archzoo.parts.interfaces import AttentionContext, NormFactory


class QKNormAttention(AttentionTemplate):
    name = "qk_norm"
    summary = "multi-head attention with the spec's norm on each head's queries and keys"
    capabilities = Capabilities(kv_cache=True)

    @dataclass
    class Config:
        bias: bool = param(False, "biases on the q/k/v and output projections")
        scale: float | None = param(None, "score scale (null: 1/sqrt(head_dim))", gt=0.0)

    def __init__(self, cfg: Any, dims: Any, *, make_norm: NormFactory) -> None:
        super().__init__(cfg, dims)
        self.n_heads, self.head_dim = dims.n_heads, dims.head_dim
        inner = dims.n_heads * dims.head_dim
        self.qkv = nn.Linear(dims.d_model, 3 * inner, bias=cfg.bias)
        self.out = nn.Linear(inner, dims.d_model, bias=cfg.bias)
        self.q_norm = make_norm(dim=dims.head_dim)  # the spec's norm, over each head
        self.k_norm = make_norm(dim=dims.head_dim)
        self.scale = cfg.scale if cfg.scale is not None else dims.head_dim**-0.5

    def cache_layout(self) -> tuple[int, int, int | None]:
        return self.n_heads, self.head_dim, None  # every key cached, H heads of head_dim

    def project_qkv(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """q, k, v (B, H, T, hd), q and k through the norms."""
        B, T, _ = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.n_heads, self.head_dim).unbind(2)  # (B, T, H, hd)
        q, k = self.q_norm(q), self.k_norm(k)  # normalise each head's vectors
        return q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # (B, H, T, hd)

    def scoring_terms(self) -> dict[str, Any]:
        return {"scale": self.scale}

    def attend(
        self, x: Tensor, ctx: AttentionContext, memory: Tensor | None = None
    ) -> tuple[Tensor, Tensor | None]:
        """The template's steps (positions, cache, score bias, the chosen kernel, `out`), for
        self-attention without a position's value term."""
        if memory is not None:
            raise ValueError("attention 'qk_norm' does not cross-attend")
        pos = ctx.position
        if pos is not None and pos.capabilities.values:
            raise ValueError(f"attention 'qk_norm' cannot apply position {pos.name!r}'s value term")
        return super().attend(x, ctx, memory)
