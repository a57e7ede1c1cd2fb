"""Block-local attention (Guo et al., 2022, LongT5's `local`): blocks of `radius + 1` tokens,
each query seeing its own block and the two beside it, keys at most `radius` away.

The blocked path gathers each query block's 3-block window (time and memory O(n * radius))
and runs SDPA on it with the position's bias over the window; `impl: dense` is the (T, T)
reference it is tested against (and the path that reports probabilities).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor

from archzoo.parts.component import param
from archzoo.parts.interfaces import AttentionContext
from archzoo.parts.kernels import Scoring
from archzoo.parts.masks import AttentionMask

from .kernels.eager import takes_eager
from .kernels.sdpa import sdpa
from .local import LocalPattern
from .sparse import SparseAttention, SparsePattern

DENSE = ("sdpa", "math")  # kernels that take this layer as its dense (T, T) reference

QKV = tuple[Tensor, Tensor, Tensor]  # q (B, H, T, hd), k and v (B, Hkv, T, hd)


class SideKeys(NamedTuple):
    """Keys every query may see besides its window (transient-global summaries)."""

    k: Tensor  # (B, Hkv, G, hd)
    v: Tensor  # (B, Hkv, G, hd)
    keep: Tensor  # (B, T, G) bool: which query sees which summary
    bias: Tensor | None  # (B, H, T, G) score bias, or None


def three_block_windows(x: Tensor, block: int) -> Tensor:
    """(B, T, ...) -> (B, nb, 3 * block, ...): each block with both neighbours, zeros outside."""
    B, T, *rest = x.shape
    nb = -(-T // block)
    left, right = x.new_zeros(B, block, *rest), x.new_zeros(B, nb * block - T + block, *rest)
    x = torch.cat([left, x, right], dim=1).view(B, nb + 2, block, *rest)
    return torch.cat([x[:, :-2], x[:, 1:-1], x[:, 2:]], dim=2)  # (B, nb, 3 * block, ...)


def window_offsets(block: int, device: Any = None) -> Tensor:
    """(block, 3 * block): key minus query position inside a window (queries in the middle)."""
    k = torch.arange(3 * block, device=device)
    return k[None, :] - k[block : 2 * block, None]


class BlockLocalAttention(
    SparseAttention, name="block_local", causal=False, kv_cache=False, accepts_bias=True
):
    """LongT5 local attention: keys within `radius` in 3-block windows, with position bias"""

    class Config(SparseAttention.Config):
        radius: int = param(127, "keys at most this far from a query (blocks of radius + 1)", min=0)

    @classmethod
    def check(cls, cfg: Any, dims: Any) -> list[tuple[str, str]]:
        issues = super().check(cfg, dims)
        if cfg.sinks or cfg.softcap is not None:
            issues.append(("sinks" if cfg.sinks else "softcap", f"not supported by {cls.name}"))
        return issues

    def make_pattern(self, length: int, device: Any = None, ctx: Any = None) -> SparsePattern:
        block = self.cfg.radius + 1
        return LocalPattern(block, block)  # |q - k| < radius + 1

    def side_keys(self, x: Tensor, valid: Tensor, ctx: AttentionContext) -> SideKeys | None:
        """Extra keys every query may see (none here; transient-global adds its summaries)."""
        return None

    def attend(
        self, x: Tensor, ctx: AttentionContext, memory: Tensor | None = None
    ) -> tuple[Tensor, Tensor | None]:
        if memory is not None:
            raise ValueError(f"attention {self.name!r} is self-attention only")
        if not self.uses_position:
            ctx = replace(ctx, position=None, position_state=None)
        if ctx.position is not None and ctx.position.capabilities.values:
            raise ValueError(f"attention {self.name!r} cannot apply position values")
        B, T, _ = x.shape
        q, k, v = self.project(x, ctx, None)  # (B, H, T, hd), (B, Hkv, T, hd)
        valid = ctx.mask.key_padding
        valid = torch.ones(1, T, dtype=torch.bool, device=x.device) if valid is None else valid
        side = self.side_keys(x, valid, ctx)
        if ctx.want_probs or self.attention_impl in DENSE:
            out, probs = self._dense((q, k, v), valid, side, ctx)  # (B, H, T, hd)
        else:
            out, probs = self._blocked((q, k, v), valid, side, ctx), None
        return self.out(out.transpose(1, 2).reshape(B, T, self.q_dim)), probs

    def _score_scale(self) -> float:
        return self.scale if self.scale is not None else self.head_dim**-0.5

    def _window_bias(self, ctx: AttentionContext, q: Tensor, k: Tensor) -> Tensor | None:
        """The position's bias (1, H, block, 3 * block) over one window (it depends on key
        minus query position only, so one window serves every block)."""
        if ctx.position is None:
            return None
        block = self.cfg.radius + 1
        pos = torch.arange(3 * block, device=q.device)[None]  # (1, 3 * block)
        state = ctx.position.prepare(pos[:, block : 2 * block], pos)
        return ctx.position.score_bias(state, q, k, self._score_scale())

    def _blocked(
        self, qkv: QKV, valid: Tensor, side: SideKeys | None, ctx: AttentionContext
    ) -> Tensor:
        """Each query block against its 3-block window (and the side keys): (B, H, T, hd)."""
        q, k, v = qkv
        B, H, T, hd = q.shape
        Hkv, radius = k.shape[1], self.cfg.radius
        block = radius + 1
        nb = -(-T // block)
        Tp = nb * block
        neg = torch.finfo(q.dtype).min
        qb = F.pad(q, (0, 0, 0, Tp - T)).view(B, H, nb, block, hd).transpose(1, 2)
        kw = three_block_windows(k.transpose(1, 2), block).transpose(2, 3)  # (B, nb, Hkv, 3bl, hd)
        vw = three_block_windows(v.transpose(1, 2), block).transpose(2, 3)
        near = window_offsets(block, q.device).abs() <= radius  # (bl, 3bl)
        keep = near & three_block_windows(valid, block)[:, :, None, :]  # (B|1, nb, bl, 3bl)
        docs = ctx.mask.key_docs
        if docs is not None:  # packed rows: a window's keys of the query's document only
            q_docs = F.pad(ctx.mask.query_docs, (0, Tp - T)).view(B, nb, block, 1)
            keep = keep & (three_block_windows(docs, block)[:, :, None, :] == q_docs)
        bias = self._window_bias(ctx, q, k)
        mask = torch.zeros(1, 1, 1, block, 3 * block, dtype=q.dtype, device=q.device)
        if bias is not None:
            mask = mask + bias[:, None].to(q.dtype)  # (1, 1, H, bl, 3bl)
        mask = mask.masked_fill(~keep[:, :, None], neg)  # (B|1, nb, H|1, bl, 3bl)
        seen = keep.any(-1)  # (B|1, nb, bl)
        if side is not None:
            G = side.k.shape[2]
            kw = torch.cat([kw, side.k[:, None].expand(B, nb, Hkv, G, hd)], dim=3)
            vw = torch.cat([vw, side.v[:, None].expand(B, nb, Hkv, G, hd)], dim=3)
            side_mask = torch.zeros(1, 1, T, G, dtype=q.dtype, device=q.device)
            if side.bias is not None:
                side_mask = side_mask + side.bias.to(q.dtype)  # (B, H, T, G)
            side_mask = side_mask.masked_fill(~side.keep[:, None], neg)
            side_mask = F.pad(side_mask, (0, 0, 0, Tp - T)).unflatten(2, (nb, block))
            side_mask = side_mask.transpose(1, 2)  # (B, nb, H|1, bl, G)
            heads = max(mask.shape[2], side_mask.shape[2])
            mask = torch.cat(
                [
                    mask.expand(B, nb, heads, block, 3 * block),
                    side_mask.expand(B, nb, heads, block, G),
                ],
                dim=-1,
            )
            side_seen = F.pad(side.keep.any(-1), (0, Tp - T)).view(B, nb, block)
            seen = seen | side_seen
        W = kw.shape[3]
        mask = mask.expand(B, nb, -1, block, W).reshape(B * nb, -1, block, W)
        qb, kw, vw = (
            qb.reshape(B * nb, H, block, hd),
            kw.reshape(B * nb, Hkv, W, hd),
            vw.reshape(B * nb, Hkv, W, hd),
        )
        if takes_eager(self.attention_impl, qb):
            out = self._eager(qb, kw, vw, mask)  # (B*nb, H, bl, hd)
        else:  # the additive window mask as SDPA's score bias
            dropout = self.dropout if self.training else 0.0
            scoring = Scoring(scale=self.scale, bias=mask, dropout=dropout)
            no_mask = AttentionMask(block, W, device=q.device)
            out, _ = sdpa(qb, kw, vw, no_mask, scoring)  # (B*nb, H, bl, hd)
        out = out.view(B, nb, H, block, hd) * seen.expand(B, nb, block)[:, :, None, :, None]
        return out.transpose(1, 2).reshape(B, H, Tp, hd)[:, :, :T]  # (B, H, T, hd)

    def _eager(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor) -> Tensor:
        """transformers' LongT5 blocks op by op (each op rounds in 16-bit floats):
        q @ k in q's dtype, + bias and mask, softmax in fp32 rounded back, @ v."""
        if k.shape[1] != q.shape[1]:
            k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)  # (N, H, W, hd)
            v = v.repeat_interleave(q.shape[1] // v.shape[1], dim=1)
        scale = self._score_scale()
        scores = q @ k.transpose(-1, -2)  # (N, H, bl, W)
        scores = (scores if scale == 1.0 else scores * scale) + mask
        probs = torch.softmax(scores.float(), -1).to(q.dtype)
        return F.dropout(probs, self.dropout, self.training) @ v  # (N, H, bl, hd)

    def _dense(
        self, qkv: QKV, valid: Tensor, side: SideKeys | None, ctx: AttentionContext
    ) -> tuple[Tensor, Tensor]:
        """Reference: the (T, T) band of width radius with the stack's bias: (B, H, T, hd)."""
        q, k, v = qkv
        B, H, T, _ = q.shape
        scale = self._score_scale()
        pos = torch.arange(T, device=q.device)
        keep = ((pos[:, None] - pos[None, :]).abs() <= self.cfg.radius) & valid[:, None, :]
        if ctx.mask.key_docs is not None:
            keep = keep & ctx.mask.same_document()  # (B, T, T)
        scores = torch.zeros(1, 1, T, T, dtype=torch.float32, device=q.device)
        if ctx.position is not None:
            bias = ctx.position.score_bias(ctx.position_state, q, k, scale)  # (B|1, H, T, T)
            scores = scores + bias.float()
        scores = scores.masked_fill(~keep[:, None], float("-inf"))  # (B|1, H|1, T, T)
        if self.n_kv != H:
            k = k.repeat_interleave(H // self.n_kv, dim=1)  # (B, H, T, hd)
            v = v.repeat_interleave(H // self.n_kv, dim=1)
        scores = scores + (q @ k.transpose(-1, -2)).float() * scale  # (B, H, T, T)
        if side is not None:
            sk, sv = side.k, side.v
            if self.n_kv != H:
                sk = sk.repeat_interleave(H // self.n_kv, dim=1)
                sv = sv.repeat_interleave(H // self.n_kv, dim=1)
            side_scores = (q @ sk.transpose(-1, -2)).float() * scale  # (B, H, T, G)
            if side.bias is not None:
                side_scores = side_scores + side.bias.float()
            side_scores = side_scores.masked_fill(~side.keep[:, None], float("-inf"))
            scores, v = torch.cat([scores, side_scores], -1), torch.cat([v, sv], 2)
        probs = torch.softmax(scores, -1).nan_to_num(0.0).to(q.dtype)  # empty rows: zeros
        dropped = F.dropout(probs, self.dropout, self.training)
        return dropped @ v, probs[..., :T]  # (B, H, T, hd), (B, H, T, T)
