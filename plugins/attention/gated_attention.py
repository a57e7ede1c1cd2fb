"""Gated attention (Qiu et al., 2025): GQA attention whose output is scaled by act(gate)
before the output projection, with per-head QK norms (the spec's norm) and the stack's rotation.

gate_source: query (Qwen3-Next) -- the gate comes from the query projection, each head's
[query | gate] 2 x head_dim wide; own_projection (AFMoE's gate_proj, Laguna's and LFM3's
g_proj) -- a separate bias-free projection of the block input, H x head_dim wide (gate_per:
channel) or H wide (gate_per: head, one scale per head broadcast over its channels).
gate_activation: sigmoid, or softplus (computed in float32, then cast back, as Laguna does).
"""

from __future__ import annotations

from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from archzoo.parts.attention_template import KernelRunner
from archzoo.parts.component import param
from archzoo.parts.interfaces import Attention, AttentionContext, NormFactory
from archzoo.parts.kernels import Scoring


class GatedAttention(KernelRunner, Attention, name="gated_mha", kv_cache=True, accepts_bias=False):
    """GQA attention with an output gate (sigmoid/softplus, per channel/head) from the query
    projection or its own projection"""

    class Config:
        n_kv_heads: int | None = param(None, "key/value heads (null: n_heads)", min=1)
        bias: bool = param(False, "biases on the q/k/v and output projections")
        qk_norm: bool = param(True, "normalise each head's query and key with the spec's norm")
        gate_source: Literal["query", "own_projection"] = param(
            "query",
            "query: each head's query projection is [query | gate]; own_projection: a separate "
            "bias-free projection of the block input (`gate`)",
        )
        gate_activation: Literal["sigmoid", "softplus"] = param(
            "sigmoid", "the gate's function (softplus computed in float32)"
        )
        gate_per: Literal["channel", "head"] = param(
            "channel", "one gate per output channel, or one per head (own_projection only)"
        )

    def __init__(self, cfg: Any, dims: Any, *, make_norm: NormFactory | None = None) -> None:
        super().__init__(cfg, dims)
        self.n_heads, self.head_dim = dims.n_heads, dims.head_dim
        self.n_kv = cfg.n_kv_heads or dims.n_heads
        d, q_dim, kv_dim = dims.d_model, self.n_heads * self.head_dim, self.n_kv * self.head_dim
        self.own_gate = cfg.gate_source == "own_projection"
        self.softplus = cfg.gate_activation == "softplus"
        self.per_head = cfg.gate_per == "head"
        self.gate = None
        if self.own_gate:
            self.q = nn.Linear(d, q_dim, bias=cfg.bias)
            self.gate = nn.Linear(d, self.n_heads if self.per_head else q_dim, bias=False)
        else:
            self.q = nn.Linear(d, 2 * q_dim, bias=cfg.bias)  # per head [query | gate]
        self.k = nn.Linear(d, kv_dim, bias=cfg.bias)
        self.v = nn.Linear(d, kv_dim, bias=cfg.bias)
        self.out = nn.Linear(q_dim, d, bias=cfg.bias)
        self.q_norm = self.k_norm = None
        if cfg.qk_norm:
            if make_norm is None:
                raise ValueError("gated_mha's qk_norm needs the spec's norm factory (make_norm)")
            self.q_norm, self.k_norm = make_norm(self.head_dim), make_norm(self.head_dim)
        self.dropout = dims.attention_dropout

    @classmethod
    def check(cls, cfg: Any, dims: Any) -> list[tuple[str, str]]:
        if cfg.n_kv_heads is not None and dims.n_heads % cfg.n_kv_heads:
            return [("n_kv_heads", f"{cfg.n_kv_heads} does not divide n_heads {dims.n_heads}")]
        if cfg.gate_per == "head" and cfg.gate_source != "own_projection":
            return [
                ("gate_per", "head needs gate_source: own_projection (a query gate is per channel)")
            ]
        return []

    @classmethod
    def cross_attention(cls, cfg: Any, dims: Any, **parts: Any) -> Attention:
        """A decoder layer attends to an encoder through plain `mha` (no gate), as `mla`."""
        from .mha import MultiHeadAttention

        own = MultiHeadAttention.Config(bias=cfg.bias, fused_qkv=False)
        return MultiHeadAttention(own, dims, cross=True, make_norm=parts.get("make_norm"))

    def cache_layout(self) -> tuple[int, int, int | None]:
        return self.n_kv, self.head_dim, None

    def attend(
        self, x: Tensor, ctx: AttentionContext, memory: Tensor | None = None
    ) -> tuple[Tensor, Tensor | None]:
        B, T, _ = x.shape
        hd = self.head_dim
        if self.gate is not None:
            q = self.q(x).view(B, T, self.n_heads, hd)
            gate = self.gate(x)  # (B, T, H*hd) or (B, T, H)
        else:
            q, gate = self.q(x).view(B, T, self.n_heads, 2 * hd).split([hd, hd], dim=-1)
        k = self.k(x).view(B, T, self.n_kv, hd)
        v = self.v(x).view(B, T, self.n_kv, hd).transpose(1, 2)  # (B, Hkv, T, hd)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = q.transpose(1, 2), k.transpose(1, 2)  # (B, H, T, hd), (B, Hkv, T, hd)
        if ctx.position is not None:
            q, k = ctx.position.rotate(ctx.position_state, q, k)
        if ctx.cache is not None:
            k, v = ctx.cache.append(k, v)
        scale = hd**-0.5
        dropout = self.dropout if self.training else 0.0
        scoring = Scoring(scale=scale, dropout=dropout, want_probs=ctx.want_probs)
        out, probs = self.run_kernel(q, k, v, ctx.mask, scoring)  # (B, H, T, hd)
        out = out.transpose(1, 2)  # (B, T, H, hd)
        if self.softplus:
            g = F.softplus(gate.float()).to(out.dtype)
        else:
            g = torch.sigmoid(gate)
        g = g.view(B, T, self.n_heads, 1 if self.per_head else hd)  # broadcast over hd per head
        return self.out((out * g).reshape(B, T, -1)), probs  # (B, T, H*hd) into out
