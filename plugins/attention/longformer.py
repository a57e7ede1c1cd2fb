"""Longformer (Beltagy et al., 2020): sliding window plus global tokens.

Each query sees keys within `window // 2` positions (HF's `attention_window`); global tokens
see every key and are seen by every query. Global positions come from the spec
(`global_tokens`) and/or per batch, as the forward's
`attention_inputs={"global_attention_mask": (B, T) bool}` (or `global_attention(model, mask)`). With
`global_projections`, global rows use their own q/k/v projections, as in Longformer.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from torch import Tensor, nn

from archzoo.component import param
from archzoo.interfaces import AttentionContext

from .sparse import SparseAttention, SparsePattern, band_layout, key_block_any


class LongformerPattern(SparsePattern):
    """|q - k| <= half, or q or k a global token. `tokens` (T,) or per batch (B, T) bool."""

    def __init__(self, half: int, tokens: Tensor, block: int) -> None:
        self.half, self.tokens, self.block = half, tokens, block
        self.per_batch = tokens.dim() == 2

    def allowed(self, q: Tensor, k: Tensor, length: int) -> Tensor:
        band = (q - k).abs() <= self.half
        g = self.tokens
        if self.per_batch:
            return band | g[:, q] | g[:, k]  # (B, ...)
        return band | g[q] | g[k]

    def allowed_at(self, b: Tensor, q: Tensor, k: Tensor, length: int) -> Tensor:
        if not self.per_batch:
            return self.allowed(q, k, length)
        return ((q - k).abs() <= self.half) | self.tokens[b, q] | self.tokens[b, k]

    def layout(self, n_blocks: int, length: int) -> Tensor:
        band = band_layout(n_blocks, self.block, -self.half, self.half)
        cols = key_block_any(self.tokens.cpu(), n_blocks, self.block)  # (nb,) or (B, nb)
        if cols.dim() == 2:
            cols = cols.any(0)
        return band | cols[None, :]

    def global_queries(self, length: int, device: torch.device) -> Tensor | None:
        g = self.tokens.to(device)
        if not bool(g.any()):
            return None
        if not self.per_batch:
            return g.nonzero().flatten()
        n = int(g.sum(-1).max())
        pos = torch.arange(length, device=device).expand_as(g)
        rows = torch.where(g, pos, length + pos)  # globals first, in order
        rows = rows.sort(dim=-1).values[:, :n]
        return torch.where(rows < length, rows, -1)  # (B, G)


class LongformerAttention(SparseAttention, name="longformer"):
    """Longformer: sliding window + global tokens (spec or per batch)"""

    class Config(SparseAttention.Config):
        window: int = param(512, "attention_window: keys within window // 2 on each side", min=2)
        global_tokens: list[int] = param([], "positions with global attention (e.g. [0])")
        global_projections: bool = param(False, "separate q/k/v projections for global rows")
        block: int | None = param(None, "block of the blocked path (null: window // 2)", min=1)

    def __init__(self, cfg: Any, dims: Any, *, cross: bool = False) -> None:
        super().__init__(cfg, dims, cross=cross)
        if cfg.global_projections:
            d, bias = dims.d_model, cfg.bias
            self.q_global = nn.Linear(d, self.q_dim, bias=bias)
            self.k_global = nn.Linear(d, self.kv_dim, bias=bias)
            self.v_global = nn.Linear(d, self.kv_dim, bias=bias)

    def make_pattern(
        self, length: int, device: Any = None, ctx: AttentionContext | None = None
    ) -> SparsePattern:
        """The spec's global tokens, plus the batch's `global_attention_mask` (B, T) if given."""
        cfg = self.cfg
        tokens = torch.zeros(length, dtype=torch.bool, device=device)
        for p in cfg.global_tokens:
            if p < length:
                tokens[p] = True
        per_batch = None if ctx is None else ctx.inputs.get(GLOBAL_INPUT)
        if per_batch is not None:
            if per_batch.shape[-1] != length:
                raise ValueError(
                    f"{GLOBAL_INPUT} covers {per_batch.shape[-1]} tokens, the sequence has {length}"
                )
            tokens = per_batch.to(device=device, dtype=torch.bool) | tokens
        half = cfg.window // 2
        return LongformerPattern(half, tokens, cfg.block or max(half, 16))

    def global_qkv(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor] | None:
        if not self.cfg.global_projections:
            return None
        return (
            self._heads(self.q_global(x), self.n_heads),
            self._heads(self.k_global(x), self.n_kv),
            self._heads(self.v_global(x), self.n_kv),
        )


GLOBAL_INPUT = "global_attention_mask"  # the per-batch input's name (HF's argument name)


@contextlib.contextmanager
def global_attention(model: nn.Module, mask: Tensor) -> Iterator[None]:
    """Pass per-batch global tokens (B, T) to every forward of `model` in this block.

    Same as calling `model(..., attention_inputs={"global_attention_mask": mask})`.
    """

    def add_input(module: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        inputs = {**(kwargs.get("attention_inputs") or {}), GLOBAL_INPUT: mask.bool()}
        return args, {**kwargs, "attention_inputs": inputs}

    handle = model.register_forward_pre_hook(add_input, with_kwargs=True)
    try:
        yield
    finally:
        handle.remove()
