"""Kimi Delta Attention (Kimi Linear, Moonshot AI, 2025): the gated delta rule with a decay
per channel of the key instead of one per head.

Per head a (dk x dv) state S decays row by row and is corrected by the delta rule:
S_t = (I - b_t k_t k_t^T) diag(a_t) S_{t-1} + b_t k_t v_t^T, read by o_t = S_t^T q_t.
q, k and v pass a short causal convolution and SiLU; q and k are L2-normalised (q also
scaled by dk^-1/2); log a_t = -exp(A_log) softplus(f_b(f_a(x)) + dt_bias) per channel
(a low-rank projection), b_t = sigmoid(b(x)) per head. The output is RMS-normalised per head,
times sigmoid(g_b(g_a(x))), then projected. Positions are not applied.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from archzoo.parts.component import param
from archzoo.parts.interfaces import Attention, AttentionContext

from .recurrent import chunked_diagonal_scan, layer_conv, recurrent_scan, token_flags


class KimiDelta(
    Attention, name="kimi_delta", bidirectional=False, accepts_bias=False, kv_cache=True
):
    """Kimi Delta Attention: a delta-rule state per head with a learned decay per key channel"""

    class Config:
        n_heads: int | None = param(None, "heads of the mixer (null: the model's n_heads)", min=1)
        head_dim: int | None = param(
            None, "query/key/value width per head (null: the model's head_dim)", min=1
        )
        conv_kernel: int = param(4, "width of the causal depthwise convolution over q, k, v", min=1)
        chunk_size: int = param(
            64, "tokens per chunk of the chunked (prefill, training) form", min=1
        )
        norm_eps: float = param(1.0e-5, "epsilon of the gated output RMSNorm", gt=0.0)

    def __init__(self, cfg: Any, dims: Any, **parts: Any) -> None:
        super().__init__(cfg, dims)
        self.H = cfg.n_heads or dims.n_heads
        self.dk = cfg.head_dim or dims.head_dim
        d, width = dims.d_model, self.H * self.dk
        self.width = width
        self.q = nn.Linear(d, width, bias=False)
        self.k = nn.Linear(d, width, bias=False)
        self.v = nn.Linear(d, width, bias=False)
        self.conv = nn.Conv1d(3 * width, 3 * width, cfg.conv_kernel, groups=3 * width, bias=False)
        self.f_a = nn.Linear(d, self.dk, bias=False)  # the decay's low-rank projection
        self.f_b = nn.Linear(self.dk, width, bias=False)
        self.dt_bias = nn.Parameter(torch.empty(width))
        self.A_log = nn.Parameter(torch.empty(self.H))
        self.b = nn.Linear(d, self.H, bias=False)  # write strength, before the sigmoid
        self.g_a = nn.Linear(d, self.dk, bias=False)  # the output gate's low-rank projection
        self.g_b = nn.Linear(self.dk, width, bias=False)
        self.norm = _SigmoidGatedRMSNorm(self.dk, cfg.norm_eps)
        self.out = nn.Linear(width, d, bias=False)

    @torch.no_grad()
    def init_weights(self, std: float) -> None:
        """A in [1, 16) per head; dt (after the softplus) log-uniform in [1e-3, 0.1] (FLA's)."""
        self.A_log.copy_(torch.empty_like(self.A_log).uniform_(1.0, 16.0).log())
        low, high = math.log(1e-3), math.log(0.1)
        dt = (torch.rand_like(self.dt_bias) * (high - low) + low).exp().clamp(min=1e-4)
        self.dt_bias.copy_(dt + torch.log(-torch.expm1(-dt)))  # softplus^-1(dt)

    def state_shapes(self) -> dict[str, tuple[tuple[int, ...], torch.dtype | None]]:
        """Per-row decoding state: the convolution window and the float32 delta-rule state."""
        return {
            "conv": ((3 * self.width, self.cfg.conv_kernel - 1), None),
            "ssm": ((self.H, self.dk, self.dk), torch.float32),
        }

    def attention_flops(self, context: int, causal: bool) -> float:
        """Per token and head: decay, recall, write and read of the dk x dk state."""
        return 8.0 * self.H * self.dk * self.dk

    def forward(self, x: Tensor, ctx: AttentionContext, memory: Tensor | None = None) -> Tensor:
        B, T, _ = x.shape
        H, dk = self.H, self.dk
        valid, docs = token_flags(ctx, B)
        cache = ctx.cache
        qkv = torch.cat([self.q(x), self.k(x), self.v(x)], dim=-1)  # (B, T, 3 H dk)
        if valid is not None:  # padding contributes nothing to the window or the state
            qkv = qkv * valid[..., None].to(qkv.dtype)
        window = None if cache is None else cache.tensors["conv"]
        qkv, window = layer_conv(self, qkv, self.conv.weight, None, window, docs)
        q, k, v = F.silu(qkv).split(self.width, dim=-1)
        q = _l2norm(q.view(B, T, H, dk).transpose(1, 2)) * dk**-0.5  # (B, H, T, dk), float32
        k = _l2norm(k.view(B, T, H, dk).transpose(1, 2))
        v = v.view(B, T, H, dk).transpose(1, 2)
        g = self.f_b(self.f_a(x)).float() + self.dt_bias.float()  # (B, T, H dk)
        g = -self.A_log.float().exp()[:, None] * F.softplus(g.view(B, T, H, dk))  # (B, T, H, dk)
        beta = torch.sigmoid(self.b(x).float())  # (B, T, H)
        if valid is not None:  # a padded token neither decays nor writes
            g, beta = g * valid[..., None, None], beta * valid[..., None]
        g, beta = g.transpose(1, 2), beta.transpose(1, 2)  # (B, H, T, dk), (B, H, T)
        state = None if cache is None else cache.tensors["ssm"]
        if state is None:
            state = q.new_zeros(B, H, dk, dk)
        if T == 1:
            o, state = recurrent_scan(q, k, v, g, state, beta=beta)
        else:
            o, state = chunked_diagonal_scan(
                q, k, v, g, state, self.cfg.chunk_size, beta=beta, docs=docs
            )  # o: (B, H, T, dk)
        if cache is not None:
            cache.tensors["conv"].copy_(window)
            cache.tensors["ssm"].copy_(state)
        gate = self.g_b(self.g_a(x)).view(B, T, H, dk)
        o = self.norm(o.transpose(1, 2).to(x.dtype), gate)  # (B, T, H, dk)
        return self.out(o.reshape(B, T, self.width))


def _l2norm(t: Tensor) -> Tensor:
    """t / sqrt(|t|^2 + 1e-6) over the last dimension, in float32 (FLA's l2norm)."""
    t = t.float()
    return t / torch.sqrt(t.pow(2).sum(-1, keepdim=True) + 1e-6)


class _SigmoidGatedRMSNorm(nn.Module):
    """w * norm(x) * sigmoid(z) per head, all in float32, cast back to x's dtype."""

    def __init__(self, width: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.eps = eps

    def forward(self, x: Tensor, z: Tensor) -> Tensor:
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return (self.weight.float() * h * torch.sigmoid(z.float())).to(x.dtype)

    @torch.no_grad()
    def init_weights(self, std: float) -> None:
        nn.init.ones_(self.weight)
