"""LFM2's gated short convolution (Liquid AI, 2025): a depthwise causal convolution of a few
tokens between two input-dependent gates.

One projection gives b, c and x (each d_model wide); y = c * conv(b * x), then the output
projection. The only state is the convolution's window of the last kernel - 1 inputs.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from archzoo.parts.component import param
from archzoo.parts.interfaces import Attention, AttentionContext

from .recurrent import layer_conv, token_flags


class ShortConv(
    Attention, name="short_conv", bidirectional=False, accepts_bias=False, kv_cache=True
):
    """gated short convolution (LFM2): c * conv(b * x) over a window of a few tokens"""

    class Config:
        conv_kernel: int = param(3, "tokens the causal depthwise convolution sees", min=1)
        bias: bool = param(False, "biases on the projections and the convolution")

    def __init__(self, cfg: Any, dims: Any, **parts: Any) -> None:
        super().__init__(cfg, dims)
        d = dims.d_model
        self.in_proj = nn.Linear(d, 3 * d, bias=cfg.bias)  # [b | c | x]
        self.conv = nn.Conv1d(d, d, cfg.conv_kernel, groups=d, bias=cfg.bias)
        self.out_proj = nn.Linear(d, d, bias=cfg.bias)

    def state_shapes(self) -> dict[str, tuple[tuple[int, ...], torch.dtype | None]]:
        """Per-row decoding state: the convolution window."""
        return {"conv": ((self.dims.d_model, self.cfg.conv_kernel - 1), None)}

    def attention_flops(self, context: int, causal: bool) -> float:
        """Per token: kernel multiply-adds per channel and the two gates."""
        return float(self.dims.d_model * (2 * self.cfg.conv_kernel + 2))

    def forward(self, x: Tensor, ctx: AttentionContext, memory: Tensor | None = None) -> Tensor:
        B, T, D = x.shape
        valid, docs = token_flags(ctx, B)
        cache = ctx.cache
        b, c, h = self.in_proj(x).chunk(3, dim=-1)  # (B, T, D) each
        h = b * h
        if valid is not None:  # padding contributes nothing to the window
            h = h * valid[..., None].to(h.dtype)
        window = None if cache is None else cache.tensors["conv"]
        h, window = layer_conv(self, h, self.conv.weight, self.conv.bias, window, docs)
        if cache is not None:
            cache.tensors["conv"].copy_(window)
        return self.out_proj(c * h)
