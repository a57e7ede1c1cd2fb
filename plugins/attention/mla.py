"""Multi-head latent attention (DeepSeek-V2/V3): keys and values come from one compressed
latent per token; a small shared key carries the rotary positions ("decoupled" RoPE).

Sizes: the spec's `head_dim` is the width of the rotary key (qk_rope_head_dim), the width
the position component rotates; each head's query/key is [nope | rope] wide, its value
`v_head_dim`. The cache holds the normalised latent (kv_lora_rank) and the rotated shared
key per token, not per-head keys and values. Decoding from the cache can fold `kv_b` into
the query and the output ("absorbed" weights): scores are q_nope W_uk . c + q_rope . k_rope,
outputs (probs . c) W_uv, so the latent is never expanded to every head.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch
from torch import Tensor, nn

from archzoo.parts.attention_probs import attention_probs
from archzoo.parts.attention_template import KernelRunner
from archzoo.parts.component import param
from archzoo.parts.interfaces import Attention, AttentionContext, NormFactory
from archzoo.parts.kernels import Scoring
from archzoo.parts.masks import AttentionMask


class MultiHeadLatentAttention(
    KernelRunner, Attention, name="mla", kv_cache=True, accepts_bias=False, mup=True
):
    """multi-head latent attention (DeepSeek-V2/V3): a compressed KV latent + decoupled rotary key"""

    class Config:
        kv_lora_rank: int | None = param(
            None, "width of the cached key/value latent (null: 8 x head_dim)", min=1
        )
        q_lora_rank: int | None = param(
            None, "width of the query's low-rank bottleneck (null: one plain q projection)", min=1
        )
        qk_nope_head_dim: int | None = param(
            None, "per-head query/key width without positions (null: 2 x head_dim)", min=1
        )
        v_head_dim: int | None = param(None, "per-head value width (null: qk_nope_head_dim)", min=1)
        bias: bool = param(False, "biases on q_a, kv_a and the output projection")
        scale: float | None = param(
            None, "score scale (null: 1/sqrt(qk_nope_head_dim + head_dim))", gt=0.0
        )
        absorb: bool = param(True, "decode from the cache with kv_b folded into query and output")
        latent_norm_eps: float | None = param(
            None,
            "epsilon of the q_a / kv_a latent norms (null: the spec norm's; Kimi Linear's "
            "are 1e-6 beside model norms of 1e-5)",
            gt=0.0,
        )

    def __init__(self, cfg: Any, dims: Any, *, make_norm: NormFactory | None = None) -> None:
        super().__init__(cfg, dims)
        if make_norm is None:
            raise ValueError("mla needs the spec's norm factory (make_norm) for its latent norms")
        d, h = dims.d_model, dims.n_heads
        self.n_heads, self.rope = h, dims.head_dim
        self.rank = cfg.kv_lora_rank or 8 * dims.head_dim
        self.nope = cfg.qk_nope_head_dim or 2 * dims.head_dim
        self.v_dim = cfg.v_head_dim or self.nope
        q_out = h * (self.nope + self.rope)
        if cfg.q_lora_rank is None:
            self.q = nn.Linear(d, q_out, bias=False)
        else:
            self.q_a = nn.Linear(d, cfg.q_lora_rank, bias=cfg.bias)
            self.q_a_norm = make_norm(cfg.q_lora_rank)
            self.q_b = nn.Linear(cfg.q_lora_rank, q_out, bias=False)
        self.kv_a = nn.Linear(d, self.rank + self.rope, bias=cfg.bias)  # [latent | rotary key]
        self.kv_a_norm = make_norm(self.rank)
        if cfg.latent_norm_eps is not None:  # the latent norms' own epsilon
            for norm in (self.kv_a_norm, getattr(self, "q_a_norm", None)):
                if norm is not None:
                    norm.cfg = replace(norm.cfg, eps=cfg.latent_norm_eps)
        self.kv_b = nn.Linear(self.rank, h * (self.nope + self.v_dim), bias=False)
        self.out = nn.Linear(h * self.v_dim, d, bias=cfg.bias)
        self.dropout = dims.attention_dropout
        score_dim = self.nope + self.rope  # muP (dims.score_exponent 1): 1 / score_dim
        self.scale = cfg.scale if cfg.scale is not None else score_dim**-dims.score_exponent

    @classmethod
    def cross_attention(cls, cfg: Any, dims: Any, **parts: Any) -> Attention:
        """A decoder layer attends to an encoder through plain `mha` (no latent to cache)."""
        from .mha import MultiHeadAttention

        own = MultiHeadAttention.Config(bias=cfg.bias, fused_qkv=False)
        return MultiHeadAttention(own, dims, cross=True, make_norm=parts.get("make_norm"))

    def cache_shapes(self) -> tuple[tuple[int, int], tuple[int, int], int | None]:
        """The latent (1 x kv_lora_rank) and the shared rotary key (1 x head_dim) per token."""
        return (1, self.rank), (1, self.rope), None

    def cache_layout(self) -> tuple[int, int, int | None]:
        raise NotImplementedError("mla caches a latent and a rotary key: see cache_shapes()")

    def attention_flops(self, context: int, causal: bool) -> float:
        """Scores over [nope | rope] and values of v_head_dim, per head and key."""
        per_key = 2 * (self.nope + self.rope) + 2 * self.v_dim
        return self.n_heads * per_key * self.keys_per_query(context, causal)

    def queries(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """q_nope (B, H, T, nope) and q_rope (B, H, T, rope), before rotation."""
        B, T, _ = x.shape
        q = self.q(x) if self.cfg.q_lora_rank is None else self.q_b(self.q_a_norm(self.q_a(x)))
        q = q.view(B, T, self.n_heads, self.nope + self.rope).transpose(1, 2)  # (B, H, T, qk)
        return q.split([self.nope, self.rope], dim=-1)

    def latent(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """The normalised latent (B, 1, T, rank) and the shared rotary key (B, 1, T, rope)."""
        c, k_rope = self.kv_a(x).split([self.rank, self.rope], dim=-1)
        return self.kv_a_norm(c)[:, None], k_rope[:, None]

    def attend(
        self, x: Tensor, ctx: AttentionContext, memory: Tensor | None = None
    ) -> tuple[Tensor, Tensor | None]:
        B, Tq, _ = x.shape
        q_nope, q_rope = self.queries(x)
        c, k_rope = self.latent(x)
        if ctx.position is not None:
            q_rope, k_rope = ctx.position.rotate(ctx.position_state, q_rope, k_rope)
        absorb = False
        if ctx.cache is not None:
            c, k_rope = ctx.cache.append(c, k_rope)  # every cached token: (B, 1, Tk, .)
            absorb = self.cfg.absorb
        route = self.absorbed if absorb else self.expanded
        out, probs = route(q_nope, q_rope, c, k_rope, ctx)  # (B, H, Tq, v)
        return self.out(out.transpose(1, 2).reshape(B, Tq, -1)), probs  # (B, Tq, d_model)

    def scoring(self, ctx: AttentionContext) -> Scoring:
        dropout = self.dropout if self.training else 0.0
        return Scoring(scale=self.scale, dropout=dropout, want_probs=ctx.want_probs)

    def expanded(
        self, q_nope: Tensor, q_rope: Tensor, c: Tensor, k_rope: Tensor, ctx: AttentionContext
    ) -> tuple[Tensor, Tensor | None]:
        """Per-head keys and values from the latent, then the kernel: (B, H, Tq, v)."""
        B, _, Tk, _ = c.shape
        kv = self.kv_b(c[:, 0]).view(B, Tk, self.n_heads, self.nope + self.v_dim)
        k_nope, v = kv.transpose(1, 2).split([self.nope, self.v_dim], dim=-1)  # (B, H, Tk, .)
        q = torch.cat([q_nope, q_rope], dim=-1)  # (B, H, Tq, nope + rope)
        k = torch.cat([k_nope, k_rope.expand(-1, self.n_heads, -1, -1)], dim=-1)
        return self.run_kernel(q, k, v, ctx.mask, self.scoring(ctx))

    def absorbed(
        self, q_nope: Tensor, q_rope: Tensor, c: Tensor, k_rope: Tensor, ctx: AttentionContext
    ) -> tuple[Tensor, Tensor | None]:
        """Attention in latent space: one shared key/value "head" of the latent, (B, H, Tq, v).

        The heads fold into the query rows, so the latent is read once instead of copied per
        head (SDPA's grouped-query path expands it on CPU)."""
        w = self.kv_b.weight.view(self.n_heads, self.nope + self.v_dim, self.rank)
        w_uk, w_uv = w.split([self.nope, self.v_dim], dim=1)  # (H, nope, rank), (H, v, rank)
        q = torch.cat([q_nope @ w_uk, q_rope], dim=-1)  # (B, H, Tq, rank + rope)
        k = torch.cat([c, k_rope], dim=-1)  # (B, 1, Tk, rank + rope)
        B, H, Tq, E = q.shape
        keep = ctx.mask.dense()  # (B or 1, 1, Tq, Tk), or None when nothing is masked
        if keep is not None:
            keep = keep.expand(-1, H, -1, -1).reshape(keep.shape[0], 1, H * Tq, -1)
        folded = AttentionMask(H * Tq, k.shape[2], keep=keep, device=q.device)
        folded_q = q.reshape(B, 1, H * Tq, E)
        scoring = replace(self.scoring(ctx), want_probs=False)  # asked for unfolded, below
        out, _ = self.run_kernel(folded_q, k, c, folded, scoring)
        out = ctx.mask.zero_empty_rows(out.view(B, H, Tq, -1))  # (B, H, Tq, rank)
        probs = attention_probs(q, k, ctx.mask, scale=self.scale) if ctx.want_probs else None
        return out @ w_uv.transpose(1, 2), probs  # (B, H, Tq, v)
