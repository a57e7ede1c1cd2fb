"""Mamba (Gu and Dao, 2023): the selective state space layer, as Mamba and Jamba run it.

One projection gives the SSM input x and a gate z (each d_inner wide); x passes a short
causal convolution and SiLU, then x_proj gives a low-rank step dt (dt_rank), B and C (N
each); dt = softplus(dt_proj(dt)). Each channel i keeps N numbers with their own decay:
h_t = exp(dt_ti A_i) * h_{t-1} + dt_ti x_ti B_t, y_ti = h_ti . C_t + D_i x_ti, then
y * silu(z) and the output projection. Jamba RMS-normalises dt, B and C (`inner_norms`)
with learned weights; Falcon-Mamba with none (`inner_norm_weights: false`).
With `heads` > 1 (Zamba) the d_inner channels split into that many heads of d_inner / heads,
each with its own x_proj (its dt, B and C read from its own channels only) and dt_proj; the
per-head tensors are then stored (heads, d_inner / heads, ...): x_proj.weight (H, R + 2N,
P), dt_proj.weight (H, P, R), dt_proj.bias, A_log and D (H, P, ...). The heads' outputs
meet again in the gate and the output projection.
Positions are not applied: the recurrence orders the tokens.
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


class HeadLinear(nn.Module):
    """One linear map per head: (..., H, in) -> (..., H, out), weight (H, out, in)."""

    def __init__(self, heads: int, width: int, out: int, bias: bool) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(heads, out, width))
        self.bias = nn.Parameter(torch.empty(heads, out)) if bias else None

    @torch.no_grad()
    def init_weights(self, std: float) -> None:
        """As the builder does an nn.Linear's: normal(0, std) weights, zero biases."""
        nn.init.normal_(self.weight, std=std)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, x: Tensor) -> Tensor:
        y = torch.einsum("...hi,hoi->...ho", x, self.weight)  # (..., H, out)
        return y if self.bias is None else y + self.bias


class Mamba(Attention, name="mamba", bidirectional=False, accepts_bias=False, kv_cache=True):
    """Mamba (v1 selective scan): a decay per channel and state entry, short conv, SiLU gate"""

    class Config:
        d_inner: int | None = param(None, "width of the SSM input x and gate z (null: 2 d_model)")
        state_size: int = param(16, "N, the state entries per channel (of B and C)", min=1)
        dt_rank: int | None = param(None, "rank of the step projection (null: d_model / 16)")
        conv_kernel: int = param(4, "width of the causal depthwise convolution over x", min=1)
        conv_bias: bool = param(True, "bias on the convolution")
        bias: bool = param(False, "biases on the input and output projections")
        inner_norms: bool = param(False, "RMS-normalise dt, B and C (Jamba, Falcon-Mamba)")
        inner_norm_weights: bool = param(
            True, "learned weights on the inner norms (false: plain RMS normalisation)"
        )
        norm_eps: float = param(1.0e-6, "epsilon of the inner norms", gt=0.0)
        chunk_size: int = param(16, "tokens per chunk (its work is chunk^2 x N per channel)", min=1)
        heads: int = param(
            1, "heads over d_inner / heads channels each, with their own x_proj and dt_proj", min=1
        )

    def __init__(self, cfg: Any, dims: Any, **parts: Any) -> None:
        super().__init__(cfg, dims)
        d = dims.d_model
        self.d_inner = cfg.d_inner or 2 * d
        self.rank = cfg.dt_rank or math.ceil(d / 16)
        n, inner, H = cfg.state_size, self.d_inner, cfg.heads
        self.in_proj = nn.Linear(d, 2 * inner, bias=cfg.bias)  # [x | z]
        self.conv = nn.Conv1d(inner, inner, cfg.conv_kernel, groups=inner, bias=cfg.conv_bias)
        if H == 1:
            self.x_proj = nn.Linear(inner, self.rank + 2 * n, bias=False)  # [dt | B | C]
            self.dt_proj = nn.Linear(self.rank, inner, bias=True)
        else:  # per head: its P = inner / H channels -> [dt | B | C], its dt -> P steps
            self.x_proj = HeadLinear(H, inner // H, self.rank + 2 * n, bias=False)
            self.dt_proj = HeadLinear(H, self.rank, inner // H, bias=True)
        per_head = () if H == 1 else (H,)  # the leading dims of per-channel tensors
        self.A_log = nn.Parameter(torch.empty(*per_head, inner // H, n))
        self.D = nn.Parameter(torch.empty(*per_head, inner // H))
        if cfg.inner_norms and cfg.inner_norm_weights:
            self.dt_norm = nn.Parameter(torch.ones(self.rank))
            self.b_norm = nn.Parameter(torch.ones(n))
            self.c_norm = nn.Parameter(torch.ones(n))
        self.out_proj = nn.Linear(inner, d, bias=cfg.bias)

    @torch.no_grad()
    def init_weights(self, std: float) -> None:
        """A_i = 1..N for every channel (S4D-real), D = 1, dt_proj's bias softplus^-1 of a
        step log-uniform in [1e-3, 0.1]; norm weights 1."""
        n = self.cfg.state_size
        self.A_log.copy_(torch.arange(1, n + 1, dtype=torch.float32).log().expand_as(self.A_log))
        nn.init.ones_(self.D)
        low, high = math.log(1e-3), math.log(0.1)
        dt = (torch.rand(self.d_inner) * (high - low) + low).exp().clamp(min=1e-4)
        nn.init.normal_(self.dt_proj.weight, std=self.rank**-0.5)
        self.dt_proj.bias.copy_((dt + torch.log(-torch.expm1(-dt))).view_as(self.dt_proj.bias))
        for name in ("dt_norm", "b_norm", "c_norm"):
            if hasattr(self, name):
                nn.init.ones_(getattr(self, name))

    @classmethod
    def check(cls, cfg: Any, dims: Any) -> list[tuple[str, str]]:
        d_inner = cfg.d_inner or 2 * dims.d_model
        if d_inner % cfg.heads:
            return [("heads", f"{cfg.heads} does not divide d_inner {d_inner}")]
        return []

    def state_shapes(self) -> dict[str, tuple[tuple[int, ...], torch.dtype | None]]:
        """Per-row decoding state: the convolution window and the float32 SSM state."""
        return {
            "conv": ((self.d_inner, self.cfg.conv_kernel - 1), None),
            "ssm": ((self.d_inner, self.cfg.state_size, 1), torch.float32),
        }

    def attention_flops(self, context: int, causal: bool) -> float:
        """Per token and channel: decay, write and read of N state entries."""
        return 6.0 * self.d_inner * self.cfg.state_size

    def _norm(self, t: Tensor, name: str) -> Tensor:
        if not self.cfg.inner_norms:
            return t
        h = t.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.cfg.norm_eps)
        if not self.cfg.inner_norm_weights:
            return h.to(t.dtype)
        return getattr(self, name) * h.to(t.dtype)

    def forward(self, x: Tensor, ctx: AttentionContext, memory: Tensor | None = None) -> Tensor:
        B, T, _ = x.shape
        N = self.cfg.state_size
        valid, docs = token_flags(ctx, B)
        cache = ctx.cache
        xs, z = self.in_proj(x).chunk(2, dim=-1)  # (B, T, I) each
        if valid is not None:  # padding contributes nothing to the window or the state
            xs = xs * valid[..., None].to(xs.dtype)
        window = None if cache is None else cache.tensors["conv"]
        xs, window = layer_conv(self, xs, self.conv.weight, self.conv.bias, window, docs)
        xs = F.silu(xs)
        H = self.cfg.heads
        if H == 1:
            dt, b, c = self.x_proj(xs).split([self.rank, N, N], dim=-1)
            dt = self._norm(dt, "dt_norm") @ self.dt_proj.weight.T  # (B, T, I)
        else:  # each head's dt, B and C from its own channels
            heads = xs.reshape(B, T, H, self.d_inner // H)  # (B, T, H, P)
            dt, b, c = self.x_proj(heads).split([self.rank, N, N], dim=-1)  # (B, T, H, .)
            dt = torch.einsum("bthr,hpr->bthp", self._norm(dt, "dt_norm"), self.dt_proj.weight)
            dt = dt.reshape(B, T, self.d_inner)  # (B, T, I)
        dt = F.softplus(dt.float() + self.dt_proj.bias.float().reshape(-1))
        if valid is not None:
            dt = dt * valid[..., None]  # a padded token neither decays nor writes
        b, c = self._norm(b, "b_norm").float(), self._norm(c, "c_norm").float()
        A = -self.A_log.float().exp().reshape(self.d_inner, N)  # (I, N)
        dt = dt.transpose(1, 2)  # (B, I, T): each channel a "head" with N state rows
        if H == 1:
            q = c[:, None].expand(B, self.d_inner, T, N)  # (B, I, T, N)
            b = b[:, None]  # (B, 1, T, N)
        else:  # a head's B and C serve its P channels
            P = self.d_inner // H
            q = c.transpose(1, 2).repeat_interleave(P, dim=1)  # (B, I, T, N)
            b = b.transpose(1, 2).repeat_interleave(P, dim=1)  # (B, I, T, N)
        k = dt[..., None] * b  # (B, I, T, N): dt_t B_t
        v = xs.float().transpose(1, 2)[..., None]  # (B, I, T, 1)
        log_decay = dt[..., None] * A[:, None]  # (B, I, T, N)
        state = None if cache is None else cache.tensors["ssm"]
        if state is None:
            state = q.new_zeros(B, self.d_inner, N, 1)
        if T == 1:
            y, state = recurrent_scan(q, k, v, log_decay, state)
        else:
            y, state = chunked_diagonal_scan(
                q, k, v, log_decay, state, self.cfg.chunk_size, docs=docs
            )
        if cache is not None:
            cache.tensors["conv"].copy_(window)
            cache.tensors["ssm"].copy_(state)
        y = y[..., 0].transpose(1, 2) + self.D.float().reshape(-1) * xs.float()  # (B, T, I)
        y = y * F.silu(z.float())
        return self.out_proj(y.to(x.dtype))
