"""N-stream self-attention (Qi et al., 2020, "ProphetNet"): a main stream and predicting streams.

The layer's input is (B, (1 + n) T, d_model): the T tokens (the main stream) followed by n
predicting streams of T rows each, which the stack places after the tokens when its
embedding has `predict_streams: n` (the count is read from the input's length). One set of
q, k, v and output projections serves every stream.

- The main stream attends causally to the main keys (padding masked), as a decoder does.
- Predicting stream s (from 0) at token t attends to the main keys j <= t - s (and always to
  key 0) and to its own key at t; its queries stand one position further on than the main
  stream's (token t's relative distances count from t + 1).
- Every query adds a learned score per head and relative-distance bucket, projected from its
  own hidden state (`relative`: d_model -> buckets x heads, bucket-major), with T5's
  unidirectional buckets of the distance to each key (exact below buckets / 2, then
  logarithmic up to max_distance).

Only the main stream's keys and values are cached: a decoding step's predicting streams see
the cached tokens and themselves. Both streams run through the layer's kernel (the registry's
SDPA by default): the main stream with the stack's mask, the predicting streams with an
explicit keep mask over [main keys | their own keys].
"""

from __future__ import annotations

import math
from dataclasses import fields
from typing import Any, Literal

import torch
from torch import Tensor, nn

from archzoo.parts.attention_template import AttentionTemplate
from archzoo.parts.component import param
from archzoo.parts.interfaces import Attention, AttentionContext, NormFactory
from archzoo.parts.kernels import Scoring
from archzoo.parts.masks import AttentionMask

from .mha import MultiHeadAttention
from .projections import ProjectionConfig, Projections, projection_issues


def relative_buckets(distance: Tensor, buckets: int, max_distance: int) -> Tensor:
    """Unidirectional buckets of `distance` = query position - key position (negative: 0):
    exact below buckets // 2, then logarithmic up to `max_distance`, capped at buckets - 1."""
    d = distance.clamp(min=0)
    exact = buckets // 2
    far = exact + (
        torch.log(d.float().clamp(min=1) / exact)
        / math.log(max_distance / exact)
        * (buckets - exact)
    )
    far = far.clamp(max=buckets - 1).to(torch.long)  # truncated toward zero, as int()
    return torch.where(d < exact, d, far)


class NgramStreamAttention(
    Projections,
    AttentionTemplate,
    name="ngram_streams",
    kv_cache=True,
    streams=True,
    bidirectional=False,
):
    """ProphetNet's self-attention: a main stream and predicting streams, relative buckets"""

    class Config(ProjectionConfig):
        buckets: int = param(32, "relative-distance buckets (ProphetNet's num_buckets)", min=2)
        max_distance: int = param(
            128, "the distance the last bucket starts at (relative_max_distance)", min=2
        )
        predict_bias_rows: Literal["own", "stream_major"] = param(
            "own",
            "which projected bias row a predicting-stream query reads: its own; or, as "
            "transformers' ProphetNet does, the rows laid out (token, stream, head) read in "
            "(stream, head, token) order (the same rows when one token is decoded at a time)",
        )

    def __init__(
        self, cfg: Any, dims: Any, *, cross: bool = False, make_norm: NormFactory | None = None
    ) -> None:
        super().__init__(cfg, dims)
        self.build_projections(cfg, dims, cross=False, make_norm=make_norm)
        # (d_model) -> (buckets, heads): a score per bucket and head, from each query's state
        self.relative = nn.Linear(dims.d_model, cfg.buckets * dims.n_heads)

    @classmethod
    def check(cls, cfg: Any, dims: Any) -> list[tuple[str, str]]:
        issues = projection_issues(cfg, dims)
        if (cfg.n_kv_heads or dims.n_heads) != dims.n_heads:
            issues.append(("n_kv_heads", "n-stream attention has one key/value head per query"))
        return issues

    @classmethod
    def cross_attention(cls, cfg: Any, dims: Any, **parts: Any) -> Attention:
        """Dense `mha` with this layer's projection settings."""
        own = {f.name: getattr(cfg, f.name) for f in fields(ProjectionConfig)}
        return MultiHeadAttention(
            MultiHeadAttention.Config(**own), dims, cross=True, make_norm=parts.get("make_norm")
        )

    def _bias_table(self, x: Tensor, *, predicting: bool) -> Tensor:
        """(B, S, T, D) -> (B, S, H, T, buckets): each query's score per bucket and head."""
        B, S, T, _ = x.shape
        table = self.relative(x).view(B, S, T, self.cfg.buckets, self.n_heads)
        if predicting and self.cfg.predict_bias_rows == "stream_major":
            # rows laid out (B, T, S, H) read as (B, S, H, T) (transformers' reshape)
            return table.permute(0, 2, 1, 4, 3).reshape(B, S, self.n_heads, T, -1)
        return table.permute(0, 1, 4, 2, 3)  # (B, S, H, T, buckets)

    def attend(
        self, x: Tensor, ctx: AttentionContext, memory: Tensor | None = None
    ) -> tuple[Tensor, Tensor | None]:
        if memory is not None:
            raise ValueError("ngram_streams is a self-attention; cross-attention uses mha")
        mask = ctx.mask
        B, L, D = x.shape
        T = mask.q_len
        n = L // T - 1  # predicting streams after the T tokens
        H = self.n_heads
        q, k, v = self.project_qkv(x)  # each (B, H, (1 + n) T, hd)
        k_main, v_main = k[:, :, :T], v[:, :, :T]
        if ctx.cache is not None:
            k_main, v_main = ctx.cache.append(k_main, v_main)  # (B, H, Tk, hd)
        Tk = k_main.shape[2]
        q_pos = mask.query_positions()  # (T,) each token's index among the keys
        k_pos = torch.arange(Tk, device=x.device)
        terms = self.scoring_terms()
        dropout = self.dropout if self.training else 0.0

        # main stream: causal over the main keys, bias of distance t - j
        table = self._bias_table(x[:, None, :T], predicting=False)[:, 0]  # (B, H, T, buckets)
        main_buckets = relative_buckets(
            q_pos[:, None] - k_pos, self.cfg.buckets, self.cfg.max_distance
        )
        bias = table.gather(-1, main_buckets.expand(B, H, T, Tk))  # (B, H, T, Tk)
        scoring = Scoring(bias=bias, dropout=dropout, want_probs=ctx.want_probs, **terms)
        out, probs = self.run_kernel(q[:, :, :T], k_main, v_main, mask, scoring)
        merged = [self.merge_heads(out)]  # (B, T, D)
        if n == 0:
            return merged[0], probs

        # predicting streams: [main keys | every stream's own keys], each query its own key
        qs = q[:, :, T:]  # (B, H, n T, hd)
        keys = torch.cat([k_main, k[:, :, T:]], dim=2)  # (B, H, Tk + n T, hd)
        values = torch.cat([v_main, v[:, :, T:]], dim=2)
        stream = torch.arange(n, device=x.device)[:, None, None]  # (n, 1, 1)
        seen = (k_pos <= q_pos[:, None] - stream) | (k_pos == 0)  # (n, T, Tk)
        if mask.key_padding is not None:
            seen = seen[None] & mask.key_padding[:, None, None, :]  # (B, n, T, Tk)
        else:
            seen = seen[None]
        own = torch.eye(n * T, dtype=torch.bool, device=x.device).view(n, T, n * T)
        keep = torch.cat([seen, own[None].expand(seen.shape[0], -1, -1, -1)], dim=-1)
        keep = keep.reshape(keep.shape[0], 1, n * T, Tk + n * T)  # (B or 1, 1, n T, Tk + n T)
        table = self._bias_table(
            x[:, T:].view(B, n, T, D), predicting=True
        )  # (B, n, H, T, buckets)
        ahead = relative_buckets(
            q_pos[:, None] + 1 - k_pos, self.cfg.buckets, self.cfg.max_distance
        )
        main_part = table.gather(-1, ahead.expand(B, n, H, T, Tk))  # (B, n, H, T, Tk)
        own_part = table[..., :1].expand(B, n, H, T, n * T)  # bucket 0: distance 0
        bias = torch.cat([main_part, own_part], dim=-1)  # (B, n, H, T, Tk + n T)
        bias = bias.transpose(1, 2).reshape(B, H, n * T, Tk + n * T)
        scoring = Scoring(bias=bias, dropout=dropout, **terms)
        out, _ = self.run_kernel(qs, keys, values, AttentionMask.from_keep(keep), scoring)
        merged.append(self.merge_heads(out))  # (B, n T, D)
        return torch.cat(merged, dim=1), probs  # (B, (1 + n) T, D)
