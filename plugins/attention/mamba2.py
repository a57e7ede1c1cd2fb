"""Mamba 2 (Dao and Gu, 2024): the state-space duality (SSD) layer.

One projection gives the gate z, the SSM input x with its B and C, and a step size dt per
head. x, B and C pass a short causal convolution and SiLU; dt = softplus(dt + dt_bias).
Each head keeps a (N x P) state h with a scalar decay: h_t = exp(dt_t A) h_{t-1} +
dt_t B_t x_t^T, y_t = h_t^T C_t + D x_t, A = -exp(A_log). B and C are shared by the heads
of a group. The output is normalised by an RMSNorm of y * silu(z) (per group), then
projected (`output_norm`: Falcon-H1 normalises y before the gate, or not at all). muP
multipliers (Falcon-H1) scale each part of the in-projection's output.
Positions are not applied: the recurrence orders the tokens.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from archzoo.parts.component import param
from archzoo.parts.interfaces import Attention, AttentionContext

from .recurrent import GatedRMSNorm, layer_conv, optional_kernel, scan, token_flags


class Mamba2(Attention, name="mamba2", bidirectional=False, accepts_bias=False, kv_cache=True):
    """Mamba 2 (SSD): a per-head state with a scalar decay, short conv and gated RMSNorm"""

    class Config:
        d_inner: int | None = param(None, "width of the SSM input x and gate z (null: 2 d_model)")
        head_dim: int = param(64, "channels of x per SSM head (heads: d_inner / head_dim)", min=1)
        state_size: int = param(128, "N, the state width per head (of B and C)", min=1)
        n_groups: int = param(1, "groups of heads sharing one B and C", min=1)
        conv_kernel: int = param(4, "width of the causal depthwise convolution over x, B, C", min=1)
        conv_bias: bool = param(True, "bias on the convolution")
        bias: bool = param(False, "biases on the input and output projections")
        out_bias: bool | None = param(
            None, "bias on the output projection (null: as bias)", null="bias"
        )
        chunk_size: int = param(
            256, "tokens per chunk of the chunked (prefill, training) form", min=1
        )
        norm_eps: float = param(1.0e-5, "epsilon of the gated RMSNorm", gt=0.0)
        dt_min: float = param(0.0, "dt is clamped to at least this after the softplus", min=0.0)
        dt_max: float | None = param(None, "dt is clamped to at most this (null: no bound)", gt=0.0)
        output_norm: Literal["gate_then_norm", "norm_then_gate", "none"] = param(
            "gate_then_norm",
            "the output's RMSNorm: of y * silu(z), of y then times silu(z), or none (y * silu(z))",
        )
        projection_scales: list[float] | None = param(
            None, "multiply the projection's z, x, B, C and dt parts by these (muP; null: 1 each)"
        )

    def __init__(self, cfg: Any, dims: Any, **parts: Any) -> None:
        super().__init__(cfg, dims)
        d = dims.d_model
        self.d_inner = cfg.d_inner or 2 * d
        self.n_heads = self.d_inner // cfg.head_dim
        self.bc_dim = cfg.n_groups * cfg.state_size
        self.conv_dim = self.d_inner + 2 * self.bc_dim
        self.in_proj = nn.Linear(d, self.d_inner + self.conv_dim + self.n_heads, bias=cfg.bias)
        conv = self.conv_dim
        self.conv = nn.Conv1d(conv, conv, cfg.conv_kernel, groups=conv, bias=cfg.conv_bias)
        self.A_log = nn.Parameter(torch.empty(self.n_heads))
        self.dt_bias = nn.Parameter(torch.empty(self.n_heads))
        self.D = nn.Parameter(torch.empty(self.n_heads))
        group = self.d_inner // cfg.n_groups
        if cfg.output_norm != "none":
            first = cfg.output_norm == "norm_then_gate"
            self.norm = GatedRMSNorm(self.d_inner, cfg.norm_eps, norm_first=first, group=group)
        out_bias = cfg.bias if cfg.out_bias is None else cfg.out_bias
        self.out_proj = nn.Linear(self.d_inner, d, bias=out_bias)
        scales = cfg.projection_scales
        # muP multipliers of the projection's z, x, B, C and dt parts; None: all 1
        self.part_scales = None if scales is None or all(v == 1.0 for v in scales) else scales

    @classmethod
    def check(cls, cfg: Any, dims: Any) -> list[tuple[str, str]]:
        d_inner = cfg.d_inner or 2 * dims.d_model
        issues = []
        if cfg.projection_scales is not None and len(cfg.projection_scales) != 5:
            got = len(cfg.projection_scales)
            issues.append(("projection_scales", f"needs 5 numbers (z, x, B, C, dt), got {got}"))
        if d_inner % cfg.head_dim:
            issues.append(("head_dim", f"{cfg.head_dim} does not divide d_inner {d_inner}"))
        elif (d_inner // cfg.head_dim) % cfg.n_groups:
            heads = d_inner // cfg.head_dim
            issues.append(("n_groups", f"{cfg.n_groups} does not divide the {heads} heads"))
        return issues

    @torch.no_grad()
    def init_weights(self, std: float) -> None:
        """A = 1..H, D = 1 and dt (after the softplus) log-uniform in [1e-3, 0.1]."""
        self.A_log.copy_(torch.arange(1, self.n_heads + 1, dtype=torch.float32).log())
        nn.init.ones_(self.D)
        low, high = math.log(1e-3), math.log(0.1)
        dt = (torch.rand(self.n_heads) * (high - low) + low).exp().clamp(min=1e-4)
        self.dt_bias.copy_(dt + torch.log(-torch.expm1(-dt)))  # softplus^-1(dt)

    def state_shapes(self) -> dict[str, tuple[tuple[int, ...], torch.dtype | None]]:
        """Per-row decoding state: the convolution window and the float32 SSM state."""
        return {
            "conv": ((self.conv_dim, self.cfg.conv_kernel - 1), None),
            "ssm": ((self.n_heads, self.cfg.state_size, self.cfg.head_dim), torch.float32),
        }

    def attention_flops(self, context: int, causal: bool) -> float:
        """Per token and head: decay, write and read of the N x P state."""
        return 6.0 * self.n_heads * self.cfg.state_size * self.cfg.head_dim

    def forward(self, x: Tensor, ctx: AttentionContext, memory: Tensor | None = None) -> Tensor:
        B, T, _ = x.shape
        H, P, N, G = self.n_heads, self.cfg.head_dim, self.cfg.state_size, self.cfg.n_groups
        valid, docs = token_flags(ctx, B)
        cache = ctx.cache
        z, xbc, dt = self.in_proj(x).split([self.d_inner, self.conv_dim, H], dim=-1)
        if self.part_scales is not None:
            sz, sx, sb, sc, sdt = self.part_scales
            parts = xbc.split([self.d_inner, self.bc_dim, self.bc_dim], dim=-1)
            xbc = torch.cat([parts[0] * sx, parts[1] * sb, parts[2] * sc], dim=-1)
            z, dt = z * sz, dt * sdt
        if valid is not None:  # padding contributes nothing to the window or the state
            xbc = xbc * valid[..., None].to(xbc.dtype)
        window = None if cache is None else cache.tensors["conv"]
        xbc, window = layer_conv(self, xbc, self.conv.weight, self.conv.bias, window, docs)
        xs, b, c = F.silu(xbc).split([self.d_inner, self.bc_dim, self.bc_dim], dim=-1)
        dt = F.softplus(dt.float() + self.dt_bias).clamp(self.cfg.dt_min, self.cfg.dt_max)
        if valid is not None:
            dt = dt * valid[..., None]  # (B, T, H): a padded token neither decays nor writes
        dt = dt.transpose(1, 2)  # (B, H, T)
        xs = xs.view(B, T, H, P).transpose(1, 2).float()  # (B, H, T, P)
        A = -self.A_log.float().exp()  # (H,)
        state = None if cache is None else cache.tensors["ssm"]
        b, c = b.view(B, T, G, N), c.view(B, T, G, N)
        chosen = optional_kernel(self, "ssd", xs, docs=docs)
        if chosen is not None:
            kernel, lib = chosen
            y, state = kernel.run(lib, xs, dt, A, b, c, state, self.cfg.chunk_size)
        else:
            b = b.transpose(1, 2).repeat_interleave(H // G, dim=1)  # (B, H, T, N)
            c = c.transpose(1, 2).repeat_interleave(H // G, dim=1)
            y, state = scan(
                c, b, xs * dt[..., None], dt * A[:, None], state, self.cfg.chunk_size, docs=docs
            )  # y: (B, H, T, P)
        if cache is not None:
            cache.tensors["conv"].copy_(window)
            cache.tensors["ssm"].copy_(state)
        y = y + self.D.float()[:, None, None] * xs
        y = y.transpose(1, 2).reshape(B, T, self.d_inner)  # (B, T, H*P)
        if self.cfg.output_norm == "none":
            return self.out_proj((y * F.silu(z.float())).to(x.dtype))
        return self.out_proj(self.norm(y.to(x.dtype), z))
