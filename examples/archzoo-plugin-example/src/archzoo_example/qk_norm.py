"""QK-norm attention (Dehghani et al., 2023; OLMo 2, Qwen3): each head's queries and keys
pass through a norm before the dot product, which keeps the attention logits bounded.

Written only against archzoo's documented attention contract (docs/plugins.md,
"Attention contract"): the norm is the spec's `norm:` component, made at width head_dim by
the factory the builder hands over; positions rotate and bias through `ctx.position`;
new keys/values go into `ctx.cache` when decoding; `ctx.mask` gives SDPA its arguments.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch.nn.functional as F
from torch import Tensor, nn

from archzoo import Capabilities, param
from archzoo.parts.interfaces import Attention, AttentionContext, NormFactory


class QKNormAttention(Attention):
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
        self.dropout = dims.attention_dropout

    def cache_layout(self) -> tuple[int, int, int | None]:
        return self.n_heads, self.head_dim, None  # every key cached, H heads of head_dim

    def forward(self, x: Tensor, ctx: AttentionContext, memory: Tensor | None = None) -> Tensor:
        if memory is not None:
            raise ValueError("attention 'qk_norm' does not cross-attend")
        B, T, _ = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.n_heads, self.head_dim).unbind(2)  # (B, T, H, hd)
        q, k = self.q_norm(q), self.k_norm(k)  # normalise each head's vectors
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # (B, H, T, hd)
        pos, state = ctx.position, ctx.position_state
        if pos is not None:
            q, k = pos.rotate(state, q, k)
            if pos.capabilities.values:
                raise ValueError(
                    f"attention 'qk_norm' cannot apply position {pos.name!r}'s value term"
                )
        if ctx.cache is not None:
            k, v = ctx.cache.append(k, v)  # (B, H, Tk, hd): the cached keys, then these
        bias = pos.score_bias(state, q, k, self.scale) if pos is not None else None
        out = F.scaled_dot_product_attention(
            q,
            k,
            v,
            **ctx.mask.sdpa(bias, q.dtype),  # attn_mask and is_causal
            dropout_p=self.dropout if self.training else 0.0,
            scale=self.scale,
        )  # (B, H, T, hd)
        out = ctx.mask.zero_empty_rows(out)  # queries that saw no key give zeros
        return self.out(out.transpose(1, 2).reshape(B, T, -1))  # (B, T, d_model)
