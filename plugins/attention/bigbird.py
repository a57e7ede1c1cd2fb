"""BigBird (Zaheer et al., 2020), ITC variant: window + global + random key blocks.

Every query block sees `window_blocks` blocks around it, the first and last `global_blocks`
blocks (which in turn see everything), and `random_blocks` blocks drawn by a seeded hash
of (seed, query block, draw): the same model gives the same pattern on every run and device.
With `random_draws: first_block` every draw is key block 0, which then counts once per draw in
the softmax of the non-global query blocks: what Hugging Face's BigBird computes in eval mode.
`dense_upto` makes short sequences attend densely, as HF does below (5 + 2r) blocks.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import Tensor

from archzoo.parts.attention_probs import attention_probs
from archzoo.parts.component import param
from archzoo.parts.interfaces import AttentionContext
from archzoo.parts.kernels import Scoring
from archzoo.parts.masks import AttentionMask

from .block_sparse import BlockLayoutPattern
from .kernels.sdpa import sdpa
from .sparse import SparseAttention, SparsePattern

MASK32 = 0xFFFFFFFF


def hashed_blocks(n_blocks: int, draws: int, seed: int) -> Tensor:
    """(nb, draws) key blocks in [0, nb), a deterministic integer hash of (seed, row, draw)."""
    i = torch.arange(n_blocks, dtype=torch.int64)[:, None]
    t = torch.arange(draws, dtype=torch.int64)[None, :]
    x = (i * 0x9E3779B1 + t * 0x85EBCA77 + (seed & MASK32) * 0xC2B2AE3D + 1) & MASK32
    for _ in range(2):
        x = (((x >> 16) ^ x) * 0x45D9F3B) & MASK32
    x = (x >> 16) ^ x
    return x % n_blocks


def bigbird_layout(
    n_blocks: int, *, window_blocks: int, global_blocks: int, random_blocks: int, seed: int
) -> Tensor:
    """Bool (nb, nb) block layout of BigBird's window, global and random blocks."""
    i = torch.arange(n_blocks)
    layout = (i[:, None] - i[None, :]).abs() <= window_blocks // 2
    g = (i < global_blocks) | (i >= n_blocks - global_blocks)
    layout |= g[:, None] | g[None, :]
    if random_blocks > 0:
        rows = i[:, None].expand(-1, random_blocks)
        layout[rows, hashed_blocks(n_blocks, random_blocks, seed)] = True
    return layout


# no KV cache: the last global blocks and the random draws depend on the sequence length
class BigBirdAttention(SparseAttention, name="bigbird", kv_cache=False):
    """BigBird block-sparse attention: window + global + seeded random blocks"""

    class Config(SparseAttention.Config):
        block: int = param(64, "block size", min=1)
        window_blocks: int = param(3, "blocks in the sliding window (odd: centred)", min=1)
        global_blocks: int = param(1, "global blocks at each end of the sequence", min=0)
        random_blocks: int = param(3, "random key blocks per query block", min=0)
        seed: int = param(0, "seed of the random blocks", min=0)
        random_draws: Literal["hashed", "first_block"] = param(
            "hashed",
            "hashed: seeded draws; first_block: every draw is key block 0, counted once per "
            "draw (HF's BigBird in eval mode; 1 window + 1 global block)",
        )
        dense_upto: int = param(
            0, "sequences of at most this many tokens attend densely (HF: (5 + 2r) * block)", min=0
        )

    @classmethod
    def check(cls, cfg: Any, dims: Any) -> list[tuple[str, str]]:
        issues = super().check(cfg, dims)
        if cfg.random_draws == "first_block" and (cfg.window_blocks, cfg.global_blocks) != (3, 1):
            issues.append(
                (
                    "random_draws",
                    "first_block is HF's layout: window_blocks 3 and global_blocks 1, got "
                    f"{cfg.window_blocks} and {cfg.global_blocks}",
                )
            )
        return issues

    def pattern(self, length: int, device: Any, ctx: AttentionContext) -> SparsePattern | None:
        """Dense attention up to `dense_upto` keys (transformers' full attention there)."""
        return None if length <= self.cfg.dense_upto else super().pattern(length, device, ctx)

    def attend(
        self, x: Tensor, ctx: AttentionContext, memory: Tensor | None = None
    ) -> tuple[Tensor, Tensor | None]:
        if memory is not None:
            raise ValueError(f"attention {self.name!r} is self-attention only")
        B, T, _ = x.shape
        if T <= self.cfg.dense_upto or self.cfg.random_draws == "hashed":
            return super().attend(x, ctx)
        if ctx.mask.causal or ctx.mask.q_offset or ctx.cache is not None:
            raise ValueError("bigbird random_draws: first_block is bidirectional self-attention")
        if ctx.mask.key_docs is not None:
            raise ValueError(
                "bigbird random_draws: first_block (HF's eval-mode layout) takes one document "
                "per row; for packed rows (document_ids) use random_draws: hashed"
            )
        q, k, v = self.project(x, ctx, None)  # (B, H, T, hd)
        scale = self.scale if self.scale is not None else self.head_dim**-0.5
        count = 1 + self.cfg.random_blocks
        probs = None
        if ctx.want_probs:
            keep, bias = itc_dense_bias(T, self.cfg.block, count, q.device)
            probs = attention_probs(q, k, ctx.mask, scale=scale, keep=keep, bias=bias.to(q.dtype))
        out = itc_attention(
            q,
            k,
            v,
            block=self.cfg.block,
            key_padding=ctx.mask.key_padding,
            scale=scale,
            first_count=count,
            dropout_p=self.dropout if self.training else 0.0,
        )  # (B, T, H, hd)
        return self.out(out.reshape(B, T, self.q_dim)), probs

    def make_pattern(self, length: int, device: Any = None, ctx: Any = None) -> SparsePattern:
        if self._pattern is None:
            self._pattern = BlockLayoutPattern(self._layout, self.cfg.block)
        return self._pattern

    _pattern: BlockLayoutPattern | None = None

    def _layout(self, n_blocks: int) -> Tensor:
        cfg = self.cfg
        return bigbird_layout(
            n_blocks,
            window_blocks=cfg.window_blocks,
            global_blocks=cfg.global_blocks,
            random_blocks=cfg.random_blocks if cfg.random_draws == "hashed" else 0,
            seed=cfg.seed,
        )


def itc_blocks(n_blocks: int, device: Any = None) -> tuple[Tensor, Tensor]:
    """Key blocks of each non-global query block 1..nb-2: (first, left, self, right, last),
    (M, 5), and which of those slots are not repeats of the first or last block."""
    i = torch.arange(1, n_blocks - 1, device=device)
    first, last = torch.zeros_like(i), torch.full_like(i, n_blocks - 1)
    blocks = torch.stack([first, i - 1, i, i + 1, last], -1)  # (M, 5)
    fresh = torch.ones_like(blocks, dtype=torch.bool)
    fresh[:, 1] = i - 1 > 0
    fresh[:, 3] = i + 1 < n_blocks - 1
    return blocks, fresh


def itc_dense_bias(length: int, block: int, first_count: int, device: Any) -> tuple[Tensor, Tensor]:
    """The dense reference of `itc_attention`: keep (1, 1, T, T) and the score bias (log of
    the first block's count for the non-global query rows)."""
    nb = math.ceil(length / block)
    qb = torch.arange(length, device=device) // block
    kb = qb
    glob = (qb == 0) | (qb == nb - 1)
    keep = ((qb[:, None] - kb[None, :]).abs() <= 1) | glob[:, None] | (kb == 0) | (kb == nb - 1)
    bias = ((kb[None, :] == 0) & ~glob[:, None]).float() * math.log(first_count)
    return keep[None, None], bias[None, None]


def itc_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    block: int,
    key_padding: Tensor | None,
    scale: float,
    first_count: int,
    dropout_p: float = 0.0,
) -> Tensor:
    """BigBird ITC attention with the first key block counted `first_count` times for the
    non-global query blocks; q, k, v (B, H, T, hd) -> (B, T, H, hd).

    The first and last query blocks see every key; query block i sees blocks 0, i-1, i, i+1
    and the last: each is one SDPA call over 5 gathered blocks, O(n * block) in memory.
    Keys past T (the last block's padding) and padded keys are masked; a query with no
    visible key gets zeros.
    """
    B, H, T, hd = q.shape
    nb = math.ceil(T / block)
    Tp = nb * block
    device = q.device
    valid = torch.arange(Tp, device=device) < T  # (Tp,)
    valid = valid[None] if key_padding is None else valid & F.pad(key_padding, (0, Tp - T))
    low = torch.finfo(q.dtype).min
    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))  # (B, T, H, hd)
    if Tp != T:
        qt, kt, vt = (F.pad(t, (0, 0, 0, 0, 0, Tp - T)) for t in (qt, kt, vt))
    k_all, v_all = kt.transpose(1, 2), vt.transpose(1, 2)  # (B, H, Tp, hd)
    g_mask = torch.zeros(valid.shape, dtype=q.dtype, device=device).masked_fill(~valid, low)
    ends = (qt[:, :block], qt[:, Tp - block :]) if nb > 1 else (qt,)
    g_q = torch.cat(ends, 1).transpose(1, 2)  # (B, H, 2 * block, hd)
    scoring = Scoring(scale=scale, bias=g_mask[:, None, None], dropout=dropout_p)
    everything = AttentionMask(g_q.shape[2], Tp, device=device)  # the bias masks the keys
    g_out = sdpa(g_q, k_all, v_all, everything, scoring)[0].transpose(1, 2)  # (B, 2bs, H, hd)
    g_out = g_out * valid.any(-1)[:, None, None, None]  # no visible key: zeros
    if nb <= 2:
        return g_out[:, :T]
    M = nb - 2
    blocks, fresh = itc_blocks(nb, device)  # (M, 5)
    kidx = (blocks[..., None] * block + torch.arange(block, device=device)).view(-1)
    kg = kt.index_select(1, kidx).view(B * M, 5 * block, H, hd).transpose(1, 2)
    vg = vt.index_select(1, kidx).view(B * M, 5 * block, H, hd).transpose(1, 2)
    # (B*M, H, 5 * block, hd)
    seen = valid[:, kidx].view(-1, M, 5, block) & fresh[None, :, :, None]  # (B|1, M, 5, bs)
    add = torch.zeros(5, block, dtype=q.dtype, device=device)
    add[0] = math.log(first_count)
    m_mask = torch.where(seen, add, low).view(-1, M, 1, 1, 5 * block)
    m_mask = m_mask.expand(B, M, 1, 1, 5 * block).reshape(B * M, 1, 1, 5 * block)
    m_q = qt[:, block : Tp - block].reshape(B * M, block, H, hd).transpose(1, 2)
    scoring = Scoring(scale=scale, bias=m_mask, dropout=dropout_p)
    everything = AttentionMask(block, 5 * block, device=device)
    m_out = sdpa(m_q, kg, vg, everything, scoring)[0]  # (B*M, H, bs, hd)
    m_any = seen.flatten(-2).any(-1).expand(B, M).reshape(B * M, 1, 1, 1)
    m_out = m_out * m_any  # no visible key: zeros
    m_out = m_out.transpose(1, 2).reshape(B, M * block, H, hd)
    return torch.cat([g_out[:, :block], m_out, g_out[:, block:]], 1)[:, :T]
