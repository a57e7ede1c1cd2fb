"""Lightning attention (MiniMax-01, 2025): linear attention with a fixed decay per head.

Per head a (d x d) state S forgets at a constant rate and adds each token's k v^T:
S_t = e^{-s} S_{t-1} + k_t v_t^T, read by o_t = S_t^T q_t (no softmax, no 1/sqrt(d)). q, k
and v come from one projection (each head's [q | k | v] side by side) through SiLU. The
rate of head h is s_h = r^(h+1) x slope_scale with r = 2^(-8/H) (ALiBi's slopes); MiniMax
lowers it with depth, slope_scale = 1 - l/(L-1) + 1e-5 at layer l of L, written per layer
by its converter. The output is RMS-normalised over all heads, gated by sigmoid(gate(x)),
then projected. Positions are not applied: the decay orders the tokens.

Prefill runs in blocks of `block_size` tokens (outputs within a block as a masked product,
the state between blocks: MiniMax's intra/inter split); decoding steps the recurrence.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from archzoo.parts.component import param
from archzoo.parts.interfaces import Attention, AttentionContext

from .recurrent import scan, token_flags


class Lightning(
    Attention, name="lightning", bidirectional=False, accepts_bias=False, kv_cache=True
):
    """lightning attention (MiniMax): linear attention with a fixed per-head decay, gated norm"""

    class Config:
        block_size: int = param(
            256, "tokens per block of the chunked (prefill, training) form", min=1
        )
        slope_scale: float = param(
            1.0,
            "multiplies every head's decay rate 2^(-8(h+1)/H) (MiniMax: 1 - l/(L-1) + 1e-5 "
            "at layer l of L)",
            gt=0.0,
        )
        norm_eps: float = param(1.0e-6, "epsilon of the RMSNorm over the heads' outputs", gt=0.0)

    def __init__(self, cfg: Any, dims: Any, **parts: Any) -> None:
        super().__init__(cfg, dims)
        d, width = dims.d_model, dims.n_heads * dims.head_dim
        self.in_proj = nn.Linear(d, 3 * width, bias=False)  # per head [q | k | v]
        self.out_gate = nn.Linear(d, width, bias=False)  # sigmoid gate on the normed output
        self.norm = _RMSNorm(width, cfg.norm_eps)
        self.out_proj = nn.Linear(width, d, bias=False)

    def slopes(self, device: torch.device | None = None) -> Tensor:
        """(H,) float32 decay rates s_h = (2^(-8/H))^(h+1) x slope_scale, as MiniMax computes them."""
        H = self.dims.n_heads
        base = 1 / (2 ** (8 / H))
        rate = base ** torch.arange(1, H + 1, device=device)  # float32
        return rate * self.cfg.slope_scale

    def state_shapes(self) -> dict[str, tuple[tuple[int, ...], torch.dtype | None]]:
        """Per-row decoding state: the float32 (d x d) state of each head."""
        H, hd = self.dims.n_heads, self.dims.head_dim
        return {"ssm": ((H, hd, hd), torch.float32)}

    def attention_flops(self, context: int, causal: bool) -> float:
        """Per token and head: decay, write and read of the d x d state."""
        return 6.0 * self.dims.n_heads * self.dims.head_dim**2

    def forward(self, x: Tensor, ctx: AttentionContext, memory: Tensor | None = None) -> Tensor:
        B, T, _ = x.shape
        H, hd = self.dims.n_heads, self.dims.head_dim
        valid, docs = token_flags(ctx, B)
        cache = ctx.cache
        qkv = F.silu(self.in_proj(x))  # (B, T, H * 3 hd)
        if valid is not None:  # padding writes nothing into the state
            qkv = qkv * valid[..., None].to(qkv.dtype)
        q, k, v = qkv.view(B, T, H, 3 * hd).transpose(1, 2).split(hd, dim=-1)  # (B, H, T, hd)
        log_decay = -self.slopes(x.device)[None, :, None].expand(B, H, T)  # (B, H, T)
        if valid is not None:  # nor does it decay it
            log_decay = log_decay * valid[:, None, :]
        state = None if cache is None else cache.tensors["ssm"]
        o, state = scan(q, k, v, log_decay, state, self.cfg.block_size, docs=docs)  # (B, H, T, hd)
        if cache is not None:
            cache.tensors["ssm"].copy_(state)
        o = o.transpose(1, 2).reshape(B, T, H * hd).to(x.dtype)  # (B, T, H hd)
        return self.out_proj(torch.sigmoid(self.out_gate(x)) * self.norm(o))


class _RMSNorm(nn.Module):
    """w * x / rms(x), computed in float32 (MiniMax's RMSNorm over the concatenated heads)."""

    def __init__(self, width: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(x.dtype)

    @torch.no_grad()
    def init_weights(self, std: float) -> None:
        nn.init.ones_(self.weight)
