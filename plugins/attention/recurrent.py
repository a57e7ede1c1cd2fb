"""The shared parts of the recurrent mixers (gated_deltanet, mamba2, short_conv, mamba,
lightning, kimi_delta).

A recurrent mixer keeps, per batch row, a state that summarises every token it has seen:
the window of its causal convolution and, for the state-space and delta-rule mixers, a
matrix S (dk x dv) per head. Two forms compute the same thing:

- chunked (prefill, training): within a chunk of C tokens the outputs are a masked
  (C x C) product, between chunks only S travels: O(T C) work, no T x T matrix;
- recurrent (decoding): one token at a time, S_t from S_{t-1}.

Optional GPU kernels (flash-linear-attention, causal-conv1d, mamba-ssm) take over an
operation where the layer's `mixer_impl` allows, the library imports and the tensors are on
its device (`optional_kernel`, archzoo.parts.mixer_kernels); otherwise the plain-PyTorch
forms below run.

Padding never reaches the state: a padded token's decay is 1 (log-decay 0), its write
strength 0 and its convolution input 0. In a packed row (document ids) the state and the
convolution window restart at each document.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from archzoo.parts.interfaces import AttentionContext
from archzoo.parts.mixer_kernels import TORCH, MixerKernel, choose
from archzoo.parts.registry import get_registry


def token_flags(ctx: AttentionContext, batch: int) -> tuple[Tensor | None, Tensor | None]:
    """(valid, docs) of the new tokens: (B, T) bool, False for padding, or None when every
    token is real; (B, T) document ids of a packed row, or None."""
    mask = ctx.mask
    valid = mask.query_valid(batch) if mask.key_padding is not None else None
    docs = mask.query_docs if mask.key_docs is not None else None
    return valid, docs


def optional_kernel(
    layer: nn.Module, op: str, reference: Tensor, **facts: Any
) -> tuple[MixerKernel, Any] | None:
    """(kernel, library) that computes `op` for this call under the layer's `mixer_impl`, or
    None for the plain-PyTorch form (the reason is in the debug log)."""
    if layer.mixer_impl == TORCH or torch.compiler.is_compiling():
        return None
    return choose(get_registry().mixer_kernels(), op, layer.mixer_impl, reference, **facts)


def layer_conv(
    layer: nn.Module,
    x: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    window: Tensor | None,
    docs: Tensor | None,
) -> tuple[Tensor, Tensor]:
    """`causal_conv`, or the optional kernel the layer may use for it."""
    chosen = optional_kernel(layer, "causal_conv", x, docs=docs, width=weight.shape[-1])
    if chosen is None:
        return causal_conv(x, weight, bias, window, docs)
    kernel, lib = chosen
    return kernel.run(lib, x, weight, bias, window)


def causal_conv(
    x: Tensor, weight: Tensor, bias: Tensor | None, window: Tensor | None, docs: Tensor | None
) -> tuple[Tensor, Tensor]:
    """Depthwise causal convolution of x (B, T, C) with weight (C, 1, K): y_t = sum_j
    w_j x_{t-K+1+j} (+ bias), the K-1 tokens before x coming from `window` (B, C, K-1)
    (zeros when None). Returns y (B, T, C) and the new window (the last K-1 inputs)."""
    B, T, C = x.shape
    K = weight.shape[-1]
    if window is None:
        window = x.new_zeros(B, C, K - 1)
    xp = torch.cat([window.to(x.dtype), x.transpose(1, 2)], dim=2)  # (B, C, K-1+T)
    if docs is None:
        y = F.conv1d(xp, weight, bias, groups=C).transpose(1, 2)  # (B, T, C)
    else:  # taps reach back only inside the token's own document
        y = x.new_zeros(B, T, C) if bias is None else bias.expand(B, T, C).clone()
        for j in range(K):
            back = K - 1 - j  # tap j reads the token `back` steps earlier
            tap = xp[:, :, j : j + T].transpose(1, 2) * weight[:, 0, j]  # (B, T, C)
            if back:
                same = torch.zeros_like(docs, dtype=torch.bool)
                same[:, back:] = docs[:, back:] == docs[:, :-back]
                tap = tap * same[..., None]
            y = y + tap
    return y, xp[:, :, xp.shape[2] - (K - 1) :]


def chunk_masks(
    docs: Tensor | None, n_tokens: int, chunk: int, batch: int, device: torch.device
) -> Iterator[tuple[slice, Tensor, Tensor]]:
    """Per chunk of a chunked scan: its slice of the (padded) tokens, keep (B, 1, C, C), the
    pairs (t, s) that interact (s <= t, the same document), and carry (B, 1, C), the tokens
    that still see the state coming into the chunk (the document of the token before it)."""
    lower = torch.ones(chunk, chunk, dtype=torch.bool, device=device).tril()  # s <= t
    prev_doc = None  # (B, 1) document of the token before the chunk
    for c in range(n_tokens // chunk):
        part = slice(c * chunk, (c + 1) * chunk)
        keep = lower.expand(batch, 1, chunk, chunk)
        carry = torch.ones(batch, 1, chunk, dtype=torch.bool, device=device)
        if docs is not None:
            dc = docs[:, part]  # (B, C)
            keep = keep & (dc[:, None, :, None] == dc[:, None, None, :])
            if prev_doc is not None:
                carry = (dc == prev_doc)[:, None]
            prev_doc = dc[:, -1:]
        yield part, keep, carry


def chunked_scan(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    log_decay: Tensor,
    state: Tensor,
    chunk: int,
    *,
    beta: Tensor | None = None,
    docs: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Outputs o_t = q_t^T S_t of the recurrence, chunk by chunk, and the last state.

    q, k (B, H, T, dk); v (B, H, T, dv); log_decay (B, H, T) <= 0; state (B, H, dk, dv).
    Without `beta`: S_t = a_t S_{t-1} + k_t v_t^T (decayed linear attention, Mamba 2's SSD).
    With beta (B, H, T): the gated delta rule, S_t = a_t (I - b_t k_t k_t^T) S_{t-1} +
    b_t k_t v_t^T. Within a chunk with g_t = sum of log-decays up to t, S_t =
    e^{g_t} S_0 + sum_{s<=t} e^{g_t - g_s} k_s u_s^T, where u = v (no delta rule) or
    solves (I + A) u = b (v - e^g k S_0), A_ts = b_t e^{g_t - g_s} k_t.k_s for s < t.
    docs (B, T): document ids; nothing crosses a document boundary. Computed in float32.
    """
    B, H, T, _ = k.shape
    pad = -T % chunk
    if pad:  # trailing zero tokens: no write, no decay
        q, k, v = (F.pad(t, (0, 0, 0, pad)) for t in (q, k, v))
        log_decay = F.pad(log_decay, (0, pad))
        beta = None if beta is None else F.pad(beta, (0, pad))
        docs = None if docs is None else F.pad(docs, (0, pad), value=-1)
    q, k, v, log_decay = (t.float() for t in (q, k, v, log_decay))
    beta = None if beta is None else beta.float()
    state = state.float()
    eye = torch.eye(chunk, device=q.device)
    outs = []
    for part, keep, carry in chunk_masks(docs, T + pad, chunk, B, q.device):
        qc, kc, vc = q[:, :, part], k[:, :, part], v[:, :, part]  # (B, H, C, .)
        g = log_decay[:, :, part].cumsum(-1)  # (B, H, C)
        diff = (g[..., :, None] - g[..., None, :]).masked_fill(~keep, -torch.inf)
        decay = diff.exp()  # (B, H, C, C): e^{g_t - g_s} where (t, s) interact, else 0
        start = g.exp() * carry  # (B, H, C): e^{g_t}, 0 after a document starts in the chunk
        if beta is not None:
            bc = beta[:, :, part, None]  # (B, H, C, 1)
            a = (bc * decay * (kc @ kc.transpose(-1, -2))).tril(-1)  # (B, H, C, C) s < t
            rhs = bc * (vc - start[..., None] * (kc @ state))  # (B, H, C, dv)
            vc = torch.linalg.solve_triangular(eye + a, rhs, upper=False, unitriangular=True)
        out = (qc @ kc.transpose(-1, -2) * decay) @ vc + start[..., None] * (qc @ state)
        outs.append(out)  # (B, H, C, dv)
        last = decay[:, :, -1, :, None]  # (B, H, C, 1): e^{g_C - g_s}, same document only
        state = start[:, :, -1, None, None] * state + (kc * last).transpose(-1, -2) @ vc
    o = torch.cat(outs, dim=2)[:, :, :T]  # (B, H, T, dv)
    return o, state


def recurrent_scan(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    log_decay: Tensor,
    state: Tensor,
    *,
    beta: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """The recurrence of `chunked_scan` (log_decay (B, H, T): one decay per head) or of
    `chunked_diagonal_scan` (log_decay (B, H, T, dk): one per state row), one token at a
    time (decoding); float32."""
    q, k, v, log_decay, state = (t.float() for t in (q, k, v, log_decay, state))
    if log_decay.dim() == 3:  # a head's decay scales every row of its state
        log_decay = log_decay[..., None]  # (B, H, T, 1)
    outs = []
    for t in range(q.shape[2]):
        kt, vt = k[:, :, t, :, None], v[:, :, t, None, :]  # (B, H, dk, 1), (B, H, 1, dv)
        state = state * log_decay[:, :, t, :, None].exp()
        if beta is not None:  # write the error of what the state recalls for k_t
            recalled = (kt * state).sum(-2, keepdim=True)  # (B, H, 1, dv)
            vt = beta[:, :, t, None, None].float() * (vt - recalled)
        state = state + kt * vt
        outs.append((q[:, :, t, :, None] * state).sum(-2))  # (B, H, dv)
    return torch.stack(outs, dim=2), state


def scan(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    log_decay: Tensor,
    state: Tensor | None,
    chunk: int,
    *,
    beta: Tensor | None = None,
    docs: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """A single decoding token through `recurrent_scan`, anything longer through
    `chunked_scan`; state None starts from zeros."""
    if state is None:
        B, H, _, dk = k.shape
        state = q.new_zeros(B, H, dk, v.shape[-1], dtype=torch.float32)
    if q.shape[2] == 1:
        return recurrent_scan(q, k, v, log_decay, state, beta=beta)
    return chunked_scan(q, k, v, log_decay, state, chunk, beta=beta, docs=docs)


def chunked_diagonal_scan(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    log_decay: Tensor,
    state: Tensor,
    chunk: int,
    *,
    beta: Tensor | None = None,
    docs: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """S_t = diag(a_t) S_{t-1} + k_t v_t^T, o_t = S_t^T q_t, with a decay per state row
    (Mamba's selective scan): log_decay (B, H, T, dk) <= 0, otherwise as `chunked_scan`.
    Within a chunk, o_t = sum_{s<=t} (sum_n q_tn k_sn e^{g_tn - g_sn}) u_s + (q_t e^{g_t})
    S_0: a (C x C x dk) tensor per head, so chunks stay small. u = v, or with beta (B, H, T)
    the channel-wise gated delta rule (Kimi Delta Attention), S_t = (I - b_t k_t k_t^T)
    diag(a_t) S_{t-1} + b_t k_t v_t^T: u solves (I + A) u = b (v - (k e^g) S_0) with A_ts =
    b_t sum_n k_tn k_sn e^{g_tn - g_sn} for s < t."""
    B, H, T, dk = k.shape
    pad = -T % chunk
    if pad:  # trailing zero tokens: no write, no decay
        q, k, v, log_decay = (F.pad(t, (0, 0, 0, pad)) for t in (q, k, v, log_decay))
        beta = None if beta is None else F.pad(beta, (0, pad))
        docs = None if docs is None else F.pad(docs, (0, pad), value=-1)
    q, k, v, log_decay, state = (t.float() for t in (q, k, v, log_decay, state))
    beta = None if beta is None else beta.float()
    eye = torch.eye(chunk, device=q.device)
    outs = []
    for part, keep, carry in chunk_masks(docs, T + pad, chunk, B, q.device):
        qc, kc, vc = q[:, :, part], k[:, :, part], v[:, :, part]
        g = log_decay[:, :, part].cumsum(2)  # (B, H, C, dk)
        diff = g[:, :, :, None] - g[:, :, None]  # (B, H, C, C, dk): g_t - g_s
        decay = diff.masked_fill(~keep[..., None], -torch.inf).exp()
        scores = torch.einsum("bhtn,bhsn,bhtsn->bhts", qc, kc, decay)  # (B, H, C, C)
        start = g.exp() * carry[..., None]  # (B, H, C, dk): e^{g_t}, 0 in a later document
        if beta is not None:
            bc = beta[:, :, part, None]  # (B, H, C, 1)
            kk = torch.einsum("bhtn,bhsn,bhtsn->bhts", kc, kc, decay)  # (B, H, C, C)
            a = (bc * kk).tril(-1)  # s < t
            rhs = bc * (vc - (kc * start) @ state)  # (B, H, C, dv)
            vc = torch.linalg.solve_triangular(eye + a, rhs, upper=False, unitriangular=True)
        outs.append(scores @ vc + (qc * start) @ state)  # (B, H, C, dv)
        last = decay[:, :, -1]  # (B, H, C, dk): e^{g_C - g_s}, same document only
        state = start[:, :, -1, :, None] * state + (kc * last).transpose(-1, -2) @ vc
    return torch.cat(outs, dim=2)[:, :, :T], state


class GatedRMSNorm(nn.Module):
    """RMSNorm with a SiLU gate: w * norm(x) * silu(z) (norm_first) or w * norm(x * silu(z)),
    normalised over groups of `group` features (all of them by default); float32 inside."""

    def __init__(self, width: int, eps: float, *, norm_first: bool, group: int | None = None):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.eps, self.norm_first, self.group = eps, norm_first, group or width

    def forward(self, x: Tensor, z: Tensor) -> Tensor:
        dtype = x.dtype
        h = x.float()
        if not self.norm_first:
            h = h * F.silu(z.float())
        *lead, width = h.shape
        grouped = h.view(*lead, width // self.group, self.group)  # (..., groups, group)
        h = (grouped * torch.rsqrt(grouped.pow(2).mean(-1, keepdim=True) + self.eps)).view_as(h)
        if self.norm_first:
            return ((self.weight * h.to(dtype)) * F.silu(z.float())).to(dtype)
        return self.weight * h.to(dtype)

    @torch.no_grad()
    def init_weights(self, std: float) -> None:
        nn.init.ones_(self.weight)
