"""Relative attention over a pooled stream (Dai et al., 2020, "Funnel-Transformer", A.2.1).

Scores of query i and key j, each term scaled by hd ** -0.5 (q: the query head, k: the key):
    (q + u) . k                       content, with the learned content bias u (H, hd)
  + c_ij (q + w) . (R(p_i - p_j) W)   the sinusoid R of the distance of the two positions,
                                      projected per head by W (d_model, H, hd), bias w
  + c_ij (q + s) . E[same_ij]         segments: E (2, H, hd), `same` when both tokens have one
                                      token type or either is a [CLS] (type 2), bias s
where c_ij is 0 when either is the separate first position (separate_first), else 1.
Positions come from the stack's `StreamState`: on a pooled stream position p stands for the
input positions from p on, the separate first one a level stride before the second, so the
distances stay those of the input. A layer that pools (`pool`) attends from the pooled stream
to the stream before pooling; `upsample_from` repeats the stream back to the input length
first and adds the stream after that layer (Funnel's decoder). Any kernel runs it (the terms
beside q . k are the score bias).
"""

from __future__ import annotations

from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from archzoo.parts.attention_template import AttentionTemplate
from archzoo.parts.component import param
from archzoo.parts.interfaces import AttentionContext
from archzoo.parts.kernels import Scoring
from archzoo.parts.stream import StreamState, StreamStep

FIRST_TYPE = 2  # the token type of a [CLS] token: the same segment as every other token


def distance_sinusoids(distances: Tensor, width: int, dtype: torch.dtype) -> Tensor:
    """(U,) distances -> (U, width) in `dtype` (transformers' order of operations in the
    model's dtype): [sin | cos] of distance x 10000 ** (-f / (width / 2)), f < width / 2."""
    half = width // 2
    freq = torch.arange(half, device=distances.device).to(dtype)
    inv = 1 / (10000 ** (freq / half))  # (half,)
    angles = distances.to(dtype)[:, None] * inv[None]  # (U, half)
    return torch.cat([angles.sin(), angles.cos()], dim=-1)


class PooledRelativeAttention(
    AttentionTemplate,
    name="pooled_relative",
    causal=False,
    accepts_rotate=False,
    accepts_bias=False,
):
    """relative attention with distance-sinusoid and segment terms over a pooled stream (Funnel)"""

    class Config:
        pool: Literal["none", "mean", "max"] = param(
            "none",
            "the stack halves the stream before this layer (mean or max of position pairs): "
            "its queries and residual are the pooled stream, its keys the stream before",
        )
        pool_keys: bool = param(False, "pool: the keys are the pooled stream too")
        separate_first: bool = param(
            False,
            "the first position ([CLS]) pools alone and takes no position or segment term",
        )
        truncate: bool = param(
            False, "separate_first: the last position is dropped before pooling pairs"
        )
        upsample_from: int | None = param(
            None,
            "before this layer the stream is repeated back to the input length and the "
            "stream after layer N (a layer index of the stack) is added; null: none",
            min=0,
        )

    def __init__(self, cfg: Any, dims: Any, **parts: Any) -> None:
        super().__init__(cfg, dims)
        d, H, hd = dims.d_model, dims.n_heads, dims.head_dim
        self.heads, self.head_dim = H, hd
        self.q = nn.Linear(d, H * hd, bias=False)
        self.k, self.v = nn.Linear(d, H * hd), nn.Linear(d, H * hd)
        self.out = nn.Linear(H * hd, d)
        self.content_bias = nn.Parameter(torch.zeros(H, hd))
        self.position_bias = nn.Parameter(torch.zeros(H, hd))
        self.position_kernel = nn.Parameter(torch.zeros(d, H, hd))
        self.segment_bias = nn.Parameter(torch.zeros(H, hd))
        self.segment_embed = nn.Parameter(torch.zeros(2, H, hd))  # [different, same]

    @classmethod
    def check(cls, cfg: Any, dims: Any) -> list[tuple[str, str]]:
        if cfg.pool != "none" and cfg.upsample_from is not None:
            return [("upsample_from", "a layer pools or upsamples the stream, not both")]
        if dims.d_model % 2:
            return [("kind", f"distance sinusoids need an even d_model, got {dims.d_model}")]
        return []

    def init_weights(self, std: float) -> None:
        """The biases, the distance projection and the segment vectors ~ N(0, std)."""
        for p in (self.content_bias, self.position_bias, self.position_kernel):
            nn.init.normal_(p, std=std)
        nn.init.normal_(self.segment_bias, std=std)
        nn.init.normal_(self.segment_embed, std=std)

    @classmethod
    def stream_step(cls, cfg: Any) -> StreamStep:
        pool = None if cfg.pool == "none" else cfg.pool
        return StreamStep(pool, cfg.pool_keys, cfg.separate_first, cfg.truncate, cfg.upsample_from)

    def _heads(self, t: Tensor) -> Tensor:
        B, T, _ = t.shape
        return t.view(B, T, self.heads, self.head_dim).transpose(1, 2)  # (B, H, T, hd)

    def attend(
        self, x: Tensor, ctx: AttentionContext, memory: Tensor | None = None
    ) -> tuple[Tensor, Tensor | None]:
        """(B, Tq, d_model) from the queries' stream x and the keys' (ctx.stream.keys or x)."""
        state = ctx.stream
        if state is None:  # a stack that never pooled: the input positions
            index = torch.arange(x.shape[1], device=x.device)
            state = StreamState(index, index, 0, 0, self.cfg.separate_first)
        source = x if state.keys is None else state.keys  # (B, Tk, d_model)
        q, k, v = self._heads(self.q(x)), self._heads(self.k(source)), self._heads(self.v(source))
        scale = self.head_dim**-0.5
        bias = scale * self.score_terms(q, k, state)  # (B, H, Tq, Tk)
        dropout = self.dropout if self.training else 0.0
        scoring = Scoring(scale=scale, bias=bias, dropout=dropout, want_probs=ctx.want_probs)
        out, probs = self.run_kernel(q, k, v, ctx.mask, scoring)  # (B, H, Tq, hd)
        return self.merge_heads(out), probs

    def score_terms(self, q: Tensor, k: Tensor, state: StreamState) -> Tensor:
        """(B, H, Tq, Tk) unscaled: the content bias's, the distance and the segment terms."""
        content = torch.einsum("hd,bhkd->bhk", self.content_bias, k)[:, :, None]  # (B,H,1,Tk)
        q_pos = state.positions(state.query_index, state.query_level)
        k_pos = state.positions(state.key_index, state.key_level)
        distance = q_pos[:, None] - k_pos[None, :]  # (Tq, Tk)
        values, where = torch.unique(distance, return_inverse=True)  # (U,), (Tq, Tk)
        sinusoids = distance_sinusoids(values, self.dims.d_model, q.dtype)  # (U, d)
        if self.training:
            sinusoids = F.dropout(sinusoids, self.dims.dropout)
        r = torch.einsum("ud,dhe->uhe", sinusoids, self.position_kernel)  # (U, H, hd)
        by_distance = torch.einsum("bhqe,uhe->bhqu", q + self.position_bias[:, None], r)
        B, H, Tq, _ = by_distance.shape
        position = by_distance.gather(-1, where.expand(B, H, Tq, where.shape[1]))  # (B,H,Tq,Tk)
        segment = self.segment_term(q, state)
        if state.separate_first:  # the first position takes neither term
            keep = (state.query_index != 0)[:, None] & (state.key_index != 0)[None, :]
            return content + (position + segment) * keep.to(q.dtype)
        return content + position + segment

    def segment_term(self, q: Tensor, state: StreamState) -> Tensor:
        """(B, H, Tq, Tk or 1): (q + s) . E[same], same when the tokens' types match or either
        is a [CLS] (type 2); without token_type_ids every token is in one segment."""
        scores = torch.einsum("bhqe,she->bhqs", q + self.segment_bias[:, None], self.segment_embed)
        if state.token_type_ids is None:
            return scores[..., 1:]  # (B, H, Tq, 1): every pair is in one segment
        tq = state.token_type_ids[:, state.query_index]  # (B, Tq)
        tk = state.token_type_ids[:, state.key_index]  # (B, Tk)
        same = (tq[:, :, None] == tk[:, None, :]) | (tq == FIRST_TYPE)[:, :, None]
        same = same | (tk == FIRST_TYPE)[:, None, :]  # (B, Tq, Tk)
        return torch.where(same[:, None], scores[..., 1:], scores[..., :1])
