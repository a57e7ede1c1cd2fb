"""Mixed attention (Jiang et al., 2020, "ConvBERT"): self-attention heads beside as many
span-based dynamic convolution heads, their outputs concatenated into one output projection.

With n_heads H and `head_ratio` r, the layer has H' = max(H // r, 1) self-attention heads and
H' convolution heads, each hd = d_model / (2 H') wide, so each half is A = d_model / 2 wide.
- Self-attention: q, k, v projections (d_model -> A) on the template's kernel (scale hd^-1/2).
- Span-based dynamic convolution: a separable convolution of x (depthwise over
  `conv_kernel_size` tokens, then pointwise to A, with a bias) gives the span-aware keys k_s;
  the kernel of head h at token t is softmax over the K taps of `conv_kernel`(q * k_s), and
  the head's output is sum_j kernel[j] * u[t - (K-1)/2 + j] over the `conv_value`
  projection u of x (zeros beyond the sequence's ends).
The convolutions are over the sequence as it is: padded positions enter the windows of
their neighbours with their hidden states (not zeros), as transformers computes them. The
window looks both ways, so the layer runs without a causal mask only.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from archzoo.parts.attention_template import AttentionTemplate
from archzoo.parts.component import param
from archzoo.parts.interfaces import AttentionContext


def heads_of(n_heads: int, head_ratio: int) -> int:
    """Self-attention heads: n_heads // head_ratio, at least one (as many conv heads)."""
    return max(n_heads // head_ratio, 1)


class SpanConvAttention(
    AttentionTemplate, name="span_conv", causal=False, accepts_rotate=False, accepts_bias=False
):
    """mixed attention: self-attention heads beside span-based dynamic convolution heads (ConvBERT)"""

    class Config:
        head_ratio: int = param(
            2,
            "self-attention heads = n_heads // head_ratio (at least 1), as many convolution "
            "heads; each d_model / (2 * that) wide",
            min=1,
        )
        conv_kernel_size: int = param(
            9, "tokens a convolution head's dynamic kernel spans, centred on the token", min=1
        )

    def __init__(self, cfg: Any, dims: Any, **parts: Any) -> None:
        super().__init__(cfg, dims)
        d, K = dims.d_model, cfg.conv_kernel_size
        self.heads = heads_of(dims.n_heads, cfg.head_ratio)
        self.head_size = d // self.heads // 2
        A = self.heads * self.head_size  # d_model / 2
        self.q, self.k, self.v = nn.Linear(d, A), nn.Linear(d, A), nn.Linear(d, A)
        # the separable convolution of the span-aware keys: depthwise over K tokens, pointwise
        self.key_depthwise = nn.Conv1d(d, d, K, groups=d, padding=K // 2, bias=False)
        self.key_pointwise = nn.Linear(d, A)
        self.conv_kernel = nn.Linear(A, self.heads * K)
        self.conv_value = nn.Linear(d, A)
        self.out = nn.Linear(2 * A, d)

    @classmethod
    def check(cls, cfg: Any, dims: Any) -> list[tuple[str, str]]:
        heads = heads_of(dims.n_heads, cfg.head_ratio)
        if dims.d_model % (2 * heads):
            problem = (
                f"{heads} self-attention heads (n_heads {dims.n_heads} // head_ratio "
                f"{cfg.head_ratio}) and as many convolution heads do not split d_model "
                f"{dims.d_model} into equal heads"
            )
            return [("head_ratio", problem)]
        if cfg.conv_kernel_size % 2 == 0:
            problem = f"{cfg.conv_kernel_size} taps have no centre token; needs an odd size"
            return [("conv_kernel_size", problem)]
        return []

    def init_weights(self, std: float) -> None:
        """The depthwise taps ~ N(0, std) like the linear maps (which the model initialises)."""
        nn.init.normal_(self.key_depthwise.weight, std=std)

    def attention_flops(self, context: int, causal: bool) -> float:
        """Per query: the self-attention half's scores and values, the kernel's K taps."""
        A, K = self.heads * self.head_size, self.cfg.conv_kernel_size
        return 4 * A * float(context) + 2 * A * K + 2 * self.dims.d_model * K

    def _heads(self, t: Tensor) -> Tensor:
        B, T, _ = t.shape
        return t.view(B, T, self.heads, self.head_size).transpose(1, 2)  # (B, H', T, hd)

    def span_conv(self, x: Tensor, q: Tensor, docs: Tensor | None = None) -> Tensor:
        """The convolution heads of x (B, T, d_model) and the queries q (B, T, A): (B, T, A).
        docs (B, T): document ids of packed rows; a tap in another document reads zeros, as
        a tap past the end of a row does."""
        B, T, _ = x.shape
        K = self.cfg.conv_kernel_size
        if docs is None:
            mixed = self.key_depthwise(x.transpose(1, 2)).transpose(1, 2)  # (B, T, d)
        else:
            near = F.pad(docs, (K // 2, K // 2), value=-1).unfold(1, K, 1)  # (B, T, K)
            same = (near == docs[..., None]).to(x.dtype)  # tap j of token t: t - K//2 + j
            taps = F.pad(x, (0, 0, K // 2, K // 2)).unfold(1, K, 1)  # (B, T, d, K)
            weight = self.key_depthwise.weight[:, 0]  # (d, K)
            mixed = (taps * same[:, :, None, :] * weight).sum(-1)  # (B, T, d)
        keys = self.key_pointwise(mixed)
        kernel = self.conv_kernel(q * keys).view(B, T, self.heads, K).softmax(-1)  # (B,T,H',K)
        u = F.pad(self.conv_value(x), (0, 0, K // 2, K // 2))  # (B, T + K - 1, A)
        windows = u.unfold(1, K, 1).view(B, T, self.heads, self.head_size, K)  # tap j: t-K//2+j
        if docs is not None:
            windows = windows * same[:, :, None, None, :]
        return torch.einsum("bthck,bthk->bthc", windows, kernel).reshape(B, T, -1)  # (B, T, A)

    def attend(
        self, x: Tensor, ctx: AttentionContext, memory: Tensor | None = None
    ) -> tuple[Tensor, Tensor | None]:
        """(B, T, d_model): [self-attention heads | convolution heads] through `out`."""
        B, T, _ = x.shape
        q = self.q(x)  # (B, T, A)
        heads = self._heads(q), self._heads(self.k(x)), self._heads(self.v(x))
        scoring = self.make_scoring(heads[0], heads[1], ctx)
        attended, probs = self.run_kernel(*heads, ctx.mask, scoring)  # (B, H', T, hd)
        conv = self.span_conv(x, q, ctx.mask.key_docs)  # (B, T, A)
        mixed = torch.cat([attended.transpose(1, 2).reshape(B, T, -1), conv], -1)
        return self.out(mixed), probs  # mixed (B, T, 2 A = d_model)
