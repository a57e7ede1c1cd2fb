"""Gated DeltaNet (Yang, Kautz and Hatamizadeh, 2024), as Qwen3-Next and Qwen3.5 run it.

Per value head a (dk x dv) state S forgets with a learned decay a_t = e^{g_t} and is
corrected by the delta rule: S_t = a_t (I - b_t k_t k_t^T) S_{t-1} + b_t k_t v_t^T, read
by o_t = S_t^T q_t. q, k and v pass a short causal convolution and SiLU first; q and k are
L2-normalised (q also scaled by dk^-1/2); g_t = -exp(A_log) softplus(a_t + dt_bias),
b_t = beta_scale x sigmoid(b_t). The output goes through an RMSNorm gated by silu(z) per
head, then the output projection. Positions are not applied: the recurrence orders tokens.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from archzoo.parts.component import param
from archzoo.parts.interfaces import Attention, AttentionContext

from .recurrent import GatedRMSNorm, layer_conv, optional_kernel, scan, token_flags


class GatedDeltaNet(
    Attention, name="gated_deltanet", bidirectional=False, accepts_bias=False, kv_cache=True
):
    """Gated DeltaNet: a delta-rule state per head with a learned decay, short conv and gated norm"""

    class Config:
        n_k_heads: int | None = param(None, "query/key heads (null: n_heads)", min=1)
        n_v_heads: int | None = param(
            None, "value heads, a multiple of n_k_heads (null: n_k_heads)", min=1
        )
        head_k_dim: int | None = param(None, "query/key width per head (null: head_dim)", min=1)
        head_v_dim: int | None = param(None, "value width per head (null: head_k_dim)", min=1)
        conv_kernel: int = param(4, "width of the causal depthwise convolution over q, k, v", min=1)
        chunk_size: int = param(
            64, "tokens per chunk of the chunked (prefill, training) form", min=1
        )
        norm_eps: float = param(1.0e-6, "epsilon of the gated output RMSNorm", gt=0.0)
        beta_scale: float = param(
            1.0,
            "b_t = this x sigmoid(.): 2.0 lets the delta rule reach negative eigenvalues "
            "(OLMo Hybrid)",
            gt=0.0,
        )

    def __init__(self, cfg: Any, dims: Any, **parts: Any) -> None:
        super().__init__(cfg, dims)
        self.n_k = cfg.n_k_heads or dims.n_heads
        self.n_v = cfg.n_v_heads or self.n_k
        self.dk = cfg.head_k_dim or dims.head_dim
        self.dv = cfg.head_v_dim or self.dk
        d, key_dim, value_dim = dims.d_model, self.n_k * self.dk, self.n_v * self.dv
        self.key_dim, self.value_dim = key_dim, value_dim
        conv_dim = 2 * key_dim + value_dim
        self.in_proj_qkv = nn.Linear(d, conv_dim, bias=False)  # [q | k | v], heads in order
        self.in_proj_z = nn.Linear(d, value_dim, bias=False)  # the output gate
        self.in_proj_b = nn.Linear(d, self.n_v, bias=False)  # write strength, before the sigmoid
        self.in_proj_a = nn.Linear(d, self.n_v, bias=False)  # decay step, before the softplus
        self.conv = nn.Conv1d(conv_dim, conv_dim, cfg.conv_kernel, groups=conv_dim, bias=False)
        self.A_log = nn.Parameter(torch.empty(self.n_v))
        self.dt_bias = nn.Parameter(torch.empty(self.n_v))
        self.norm = GatedRMSNorm(self.dv, cfg.norm_eps, norm_first=True)
        self.out_proj = nn.Linear(value_dim, d, bias=False)

    @classmethod
    def check(cls, cfg: Any, dims: Any) -> list[tuple[str, str]]:
        n_k = cfg.n_k_heads or dims.n_heads
        n_v = cfg.n_v_heads or n_k
        if n_v % n_k:
            return [("n_v_heads", f"{n_v} is not a multiple of n_k_heads {n_k}")]
        return []

    @torch.no_grad()
    def init_weights(self, std: float) -> None:
        """Decay rates A in [1, 16) and dt_bias 1, as the reference initialisation."""
        self.A_log.copy_(torch.empty_like(self.A_log).uniform_(1.0, 16.0).log())
        nn.init.ones_(self.dt_bias)

    def state_shapes(self) -> dict[str, tuple[tuple[int, ...], torch.dtype | None]]:
        """Per-row decoding state: the convolution window and the float32 delta-rule state."""
        conv_dim = 2 * self.key_dim + self.value_dim
        return {
            "conv": ((conv_dim, self.cfg.conv_kernel - 1), None),
            "ssm": ((self.n_v, self.dk, self.dv), torch.float32),
        }

    def attention_flops(self, context: int, causal: bool) -> float:
        """Per token and head: decay, recall, write and read of the dk x dv state."""
        return 8.0 * self.n_v * self.dk * self.dv

    def forward(self, x: Tensor, ctx: AttentionContext, memory: Tensor | None = None) -> Tensor:
        B, T, _ = x.shape
        valid, docs = token_flags(ctx, B)
        cache = ctx.cache
        qkv = self.in_proj_qkv(x)  # (B, T, 2 Kd + Vd)
        if valid is not None:  # padding contributes nothing to the window or the state
            qkv = qkv * valid[..., None].to(qkv.dtype)
        window = None if cache is None else cache.tensors["conv"]
        qkv, window = layer_conv(self, qkv, self.conv.weight, None, window, docs)
        q, k, v = F.silu(qkv).split([self.key_dim, self.key_dim, self.value_dim], dim=-1)
        q = q.view(B, T, self.n_k, self.dk).transpose(1, 2)  # (B, Hk, T, dk)
        k = k.view(B, T, self.n_k, self.dk).transpose(1, 2)
        v = v.view(B, T, self.n_v, self.dv).transpose(1, 2)  # (B, Hv, T, dv)
        if self.n_v != self.n_k:  # each q/k head serves n_v / n_k consecutive value heads
            q = q.repeat_interleave(self.n_v // self.n_k, dim=1)  # (B, Hv, T, dk)
            k = k.repeat_interleave(self.n_v // self.n_k, dim=1)
        q = _l2norm(q) * self.dk**-0.5  # float32 from here
        k = _l2norm(k)
        beta = torch.sigmoid(self.in_proj_b(x).float()) * self.cfg.beta_scale  # (B, T, Hv)
        g = -self.A_log.float().exp() * F.softplus(self.in_proj_a(x).float() + self.dt_bias)
        if valid is not None:
            beta, g = beta * valid[..., None], g * valid[..., None]
        state = None if cache is None else cache.tensors["ssm"]
        g, beta = g.transpose(1, 2), beta.transpose(1, 2)  # (B, Hv, T)
        chosen = optional_kernel(self, "gated_delta_rule", q, docs=docs)
        if chosen is not None:
            kernel, lib = chosen
            o, state = kernel.run(lib, q, k, v, g, beta, state)
        else:
            o, state = scan(q, k, v, g, state, self.cfg.chunk_size, beta=beta, docs=docs)
        # o: (B, Hv, T, dv)
        if cache is not None:
            cache.tensors["conv"].copy_(window)
            cache.tensors["ssm"].copy_(state)
        z = self.in_proj_z(x).view(B, T, self.n_v, self.dv)
        o = self.norm(o.transpose(1, 2).to(x.dtype), z)  # (B, T, Hv, dv)
        return self.out_proj(o.reshape(B, T, self.value_dim))


def _l2norm(t: Tensor) -> Tensor:
    """t / sqrt(|t|^2 + 1e-6) over the last dimension, in float32 (FLA's l2norm)."""
    t = t.float()
    return t * torch.rsqrt(t.pow(2).sum(-1, keepdim=True) + 1e-6)
