"""Talking-heads attention (Shazeer et al., 2020): heads exchange scores and probabilities.

Plain multi-head attention keeps heads apart until the output projection. Talking heads
adds two learned H x H mixes across the head axis: one of the scores before the softmax
and one of the probabilities after it. With both mixes at the identity (their initial
value) it is exactly multi-head attention.

The mixes sit between the score and the softmax, so this layer computes the scores
explicitly instead of calling scaled_dot_product_attention.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from archzoo import Capabilities, param
from archzoo.parts.interfaces import Attention, AttentionContext


class TalkingHeadsAttention(Attention):
    name = "talking_heads"
    summary = "talking-heads attention: learned mixes across heads before and after the softmax"
    capabilities = Capabilities(kv_cache=True)

    @dataclass
    class Config:
        bias: bool = param(True, "biases on the q/k/v and output projections")
        mix_scores: bool = param(True, "learn an H x H mix of the scores before the softmax")
        mix_probs: bool = param(True, "learn an H x H mix of the probabilities after it")
        scale: float | None = param(None, "score scale (null: 1/sqrt(head_dim))", gt=0.0)

    def __init__(self, cfg: Any, dims: Any) -> None:
        super().__init__(cfg, dims)
        self.n_heads, self.head_dim = dims.n_heads, dims.head_dim
        self.inner = dims.n_heads * dims.head_dim
        self.qkv = nn.Linear(dims.d_model, 3 * self.inner, bias=cfg.bias)
        self.out = nn.Linear(self.inner, dims.d_model, bias=cfg.bias)
        eye = torch.eye(dims.n_heads)
        self.score_mix = nn.Parameter(eye.clone()) if cfg.mix_scores else None
        self.prob_mix = nn.Parameter(eye.clone()) if cfg.mix_probs else None
        self.dropout = dims.attention_dropout

    @torch.no_grad()
    def init_weights(self, std: float) -> None:
        """Start as multi-head attention: both mixes at the identity."""
        for mix in (self.score_mix, self.prob_mix):
            if mix is not None:
                mix.copy_(torch.eye(self.n_heads))

    def cache_layout(self) -> tuple[int, int, int | None]:
        return self.n_heads, self.head_dim, None

    def forward(self, x: Tensor, ctx: AttentionContext, memory: Tensor | None = None) -> Tensor:
        if memory is not None:
            raise ValueError("talking_heads attention does not cross-attend")
        B, Tq, _ = x.shape
        q, k, v = self.qkv(x).view(B, Tq, 3, self.n_heads, self.head_dim).unbind(2)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # (B, H, Tq, hd)
        pos, state = ctx.position, ctx.position_state
        if pos is not None:
            q, k = pos.rotate(state, q, k)
        if ctx.cache is not None:
            k, v = ctx.cache.append(k, v)  # (B, H, Tk, hd)
        scale = self.cfg.scale if self.cfg.scale is not None else self.head_dim**-0.5
        scores = (q @ k.transpose(-1, -2)) * scale  # (B, H, Tq, Tk)
        bias = pos.score_bias(state, q, k, scale) if pos is not None else None
        if bias is not None:
            scores = scores + bias.to(scores.dtype)
        if self.score_mix is not None:
            scores = mix_heads(scores, self.score_mix)
        keep = ctx.mask.dense()  # (B or 1, 1, Tq, Tk) bool, or None: every key visible
        if keep is not None:
            scores = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
        probs = scores.softmax(-1)
        if self.prob_mix is not None:
            probs = mix_heads(probs, self.prob_mix)
        probs = F.dropout(probs, self.dropout, self.training)
        out = probs @ v  # (B, H, Tq, hd)
        if pos is not None and pos.capabilities.values:  # Shaw et al.: relative values
            out = out + pos.value_bias(state, probs)
        out = ctx.mask.zero_empty_rows(out)
        return self.out(out.transpose(1, 2).reshape(B, Tq, self.inner))  # (B, Tq, H*hd)


def mix_heads(t: Tensor, mix: Tensor) -> Tensor:
    """Mix the head axis of (B, H, Tq, Tk): out[:, g] = sum_h t[:, h] * mix[h, g]."""
    return torch.einsum("bhqk,hg->bgqk", t, mix.to(t.dtype))
