"""DeBERTa's disentangled attention (He et al., 2021), through SDPA with an additive bias.

score(i, j) = [q_i.k_j + q_i.Kr[d(i,j)] (c2p) + k_j.Qr[d(i,j)] (p2c)] / sqrt(hd * scale_factor)

Kr, Qr are the stack position's relative table (`deberta_relative`) projected by this
layer's key / query projections (`share_key`) or by projections of their own; d(i, j) is the
table row of distance i - j. The two terms are gathered from (Tq, 2 span) products, so memory
stays O(B H T T) like the scores themselves.
"""

from __future__ import annotations

from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from archzoo.parts.attention_template import KernelRunner
from archzoo.parts.component import param
from archzoo.parts.interfaces import Attention, AttentionContext
from archzoo.parts.kernels import Scoring

from .kernels.eager import takes_eager
from .mha import MultiHeadAttention

TERMS = ("c2p", "p2c")


class DisentangledAttention(KernelRunner, Attention, name="disentangled"):
    """DeBERTa's attention: content plus c2p / p2c terms over a shared relative table (SDPA)"""

    class Config:
        terms: list[Literal["c2p", "p2c"]] = param(
            ["c2p", "p2c"], "relative terms (HF pos_att_type): content->position, position->content"
        )
        share_key: bool = param(
            True, "project the table with this layer's key/query weights (HF share_att_key)"
        )
        bias: Literal["qkv", "qv"] = param(
            "qkv", "projections with a bias (DeBERTa v1: q and v only)"
        )
        position_key_bias: bool = param(
            True, "a bias on the separate c2p table projection (v1's pos_proj has none)"
        )
        scale_factor: int | None = param(
            None, "scores are divided by sqrt(head_dim * this) (null: 1 + number of terms)", min=1
        )
        uniform_padded: bool = param(
            False, "a padded query averages every value (HF's fully masked 2-D mask rows)"
        )

    def __init__(self, cfg: Any, dims: Any, **_: Any) -> None:
        super().__init__(cfg, dims)
        self.n_heads, self.head_dim = dims.n_heads, dims.head_dim
        d, inner = dims.d_model, dims.n_heads * dims.head_dim
        self.inner = inner
        self.qkv = nn.Linear(d, 3 * inner, bias=cfg.bias == "qkv")
        if cfg.bias == "qv":  # v1: a query and a value bias, none on the keys
            self.q_bias = nn.Parameter(torch.zeros(inner))
            self.v_bias = nn.Parameter(torch.zeros(inner))
        self.out = nn.Linear(inner, d)
        if not cfg.share_key:
            if "c2p" in cfg.terms:
                self.position_key = nn.Linear(d, inner, bias=cfg.position_key_bias)
            if "p2c" in cfg.terms:
                self.position_query = nn.Linear(d, inner)
        factor = cfg.scale_factor or 1 + len(cfg.terms)
        self.scale = (self.head_dim * factor) ** -0.5
        self.dropout = dims.attention_dropout
        self.table_dropout = dims.dropout

    @classmethod
    def cross_attention(cls, cfg: Any, dims: Any, **parts: Any) -> Attention:
        """A decoder's cross-attention: dense `mha` (no relative terms across sequences)."""
        return MultiHeadAttention(MultiHeadAttention.Config(), dims, cross=True)

    @classmethod
    def check(cls, cfg: Any, dims: Any) -> list[tuple[str, str]]:
        if len(set(cfg.terms)) != len(cfg.terms):
            return [("terms", f"each term may appear once, got {cfg.terms}")]
        return []

    def _bias(self) -> Tensor | None:
        """The fused projection's bias (3 * inner,), zero for the keys in v1's layout."""
        if self.cfg.bias == "qkv":
            return self.qkv.bias
        return torch.cat([self.q_bias, torch.zeros_like(self.q_bias), self.v_bias])

    def _project(self, x: Tensor, which: int) -> Tensor:
        """x through the query (0) or key (1) part of the fused projection."""
        rows = slice(which * self.inner, (which + 1) * self.inner)
        bias = self._bias()
        return F.linear(x, self.qkv.weight[rows], None if bias is None else bias[rows])

    def _table_heads(self, table: Tensor, which: str) -> Tensor:
        """The relative table (2S, d) as position keys / queries per head (H, 2S, hd)."""
        if self.cfg.share_key:
            t = self._project(table, 1 if which == "key" else 0)
        else:
            t = (self.position_key if which == "key" else self.position_query)(table)
        return t.view(table.shape[0], self.n_heads, self.head_dim).transpose(0, 1)

    def relative_scores(
        self, q: Tensor, k: Tensor, state: Any, root: Tensor | None = None
    ) -> Tensor:
        """c2p + p2c terms (B, H, Tq, Tk) from q (B, H, Tq, hd), k (B, H, Tk, hd): unscaled,
        or each term divided by `root` before they are summed (HF's order)."""
        index, table = state.index, state.table  # (B, Tq, Tk), (2S, d)
        table = F.dropout(table.to(q.dtype), self.table_dropout, self.training)
        B, H, Tq, _ = q.shape
        Tk = k.shape[2]
        scores = None
        if "c2p" in self.cfg.terms:
            c2p = q @ self._table_heads(table, "key").transpose(-1, -2)  # (B, H, Tq, 2S)
            scores = c2p.gather(-1, index[:, None].expand(B, H, Tq, Tk))
            scores = scores if root is None else scores / root
        if "p2c" in self.cfg.terms:
            p2c = k @ self._table_heads(table, "query").transpose(-1, -2)  # (B, H, Tk, 2S)
            at = index.transpose(1, 2)[:, None].expand(B, H, Tk, Tq)  # key j, query i: d(i, j)
            term = p2c.gather(-1, at).transpose(-1, -2)  # (B, H, Tq, Tk)
            term = term if root is None else term / root
            scores = term if scores is None else scores + term
        return scores

    def attend(
        self, x: Tensor, ctx: AttentionContext, memory: Tensor | None = None
    ) -> tuple[Tensor, Tensor | None]:
        if memory is not None:
            raise ValueError("attention 'disentangled' does not cross-attend")
        B, T, _ = x.shape
        qkv = F.linear(x, self.qkv.weight, self._bias())  # (B, T, 3 * H * hd)
        q, k, v = (
            t.view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
            for t in qkv.split(self.inner, dim=-1)
        )
        pos, state = ctx.position, ctx.position_state  # q, k, v: (B, H, T, hd)
        if pos is not None:
            q, k = pos.rotate(state, q, k)
        if self.cfg.terms and not hasattr(state, "table"):
            raise ValueError(
                f"attention 'disentangled' with terms {self.cfg.terms} needs position "
                f"'deberta_relative' (its relative table), got "
                f"{pos.name if pos is not None else None!r}"
            )
        eager = takes_eager(self.attention_impl, q)
        if eager:
            out, probs = self._eager(q, k, v, ctx)
        else:
            bias = None
            if self.cfg.terms:
                bias = self.relative_scores(q, k, state) * self.scale  # (B, H, Tq, Tk)
            elif pos is not None:
                bias = pos.score_bias(state, q, k, self.scale)
            dropout = self.dropout if self.training else 0.0
            scoring = Scoring(
                scale=self.scale, bias=bias, dropout=dropout, want_probs=ctx.want_probs
            )
            out, probs = self.run_kernel(q, k, v, ctx.mask, scoring)  # (B, H, T, hd)
        out = ctx.mask.zero_empty_rows(out)
        query_real = self._real_queries(ctx, T)
        if query_real is not None and not eager:
            out = torch.where(query_real, out, v.mean(-2, keepdim=True))  # uniform over keys
        return self.out(out.transpose(1, 2).reshape(B, T, self.inner)), probs  # (B, T, d_model)

    def _real_queries(self, ctx: AttentionContext, T: int) -> Tensor | None:
        """With `uniform_padded` and padding: bool (B, 1, T, 1), the real queries."""
        real = ctx.mask.key_padding
        if not self.cfg.uniform_padded or real is None:
            return None
        start = ctx.mask.q_offset
        return real[:, None, start : start + T, None]

    def _eager(
        self, q: Tensor, k: Tensor, v: Tensor, ctx: AttentionContext
    ) -> tuple[Tensor, Tensor]:
        """Attention (B, H, Tq, hd) in HF DisentangledSelfAttention's ops and order."""
        pos, state = ctx.position, ctx.position_state
        root = torch.tensor(self.scale**-2, dtype=torch.float32).sqrt().to(q.dtype)
        scores = q @ (k.transpose(-1, -2) / root)  # (B, H, Tq, Tk)
        if self.cfg.terms:
            scores = scores + self.relative_scores(q, k, state, root)
        elif pos is not None:
            bias = pos.score_bias(state, q, k, self.scale)
            scores = scores if bias is None else scores + bias.to(scores.dtype)
        keep, query_real = ctx.mask.dense(), self._real_queries(ctx, q.shape[2])
        if query_real is not None:  # a padded query's row masked whole: a uniform softmax
            keep = query_real if keep is None else keep & query_real
        if keep is not None:
            scores = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
        upcast = torch.promote_types(scores.dtype, torch.float32)  # fp16/bf16 in fp32
        probs = scores.softmax(-1, dtype=upcast).to(q.dtype)
        return F.dropout(probs, self.dropout, self.training) @ v, probs
