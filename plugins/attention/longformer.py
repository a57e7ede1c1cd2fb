"""Longformer (Beltagy et al., 2020): sliding window plus global tokens.

Each query sees keys within `window // 2` positions (HF's `attention_window`); global tokens
see every key and are seen by every query. Global positions come from the spec
(`global_tokens`) and/or per batch, as the forward's `global_attention_mask=` (B, T) keyword
(or `attention_inputs={"global_attention_mask": ...}`, or `global_attention(model, mask)`);
without one, `default_global` derives them from the input ids as HF's task models do. Padding
is never global. With `global_projections`, global rows use their own q/k/v projections.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, Literal

import torch
from torch import Tensor, nn

from archzoo.parts.component import param
from archzoo.parts.interfaces import AttentionContext
from archzoo.parts.kernels import Scoring
from archzoo.parts.masks import AttentionMask

from .kernels.masked import masked_sdpa
from .kernels.sdpa import sdpa
from .sparse import GlobalQKV, SparseAttention, SparsePattern, band_layout, key_block_any


class LongformerPattern(SparsePattern):
    """|q - k| <= half, or q or k a global token. `tokens` (T,) or per batch (B, T) bool;
    `rows` (B, T) bool, when given: only those queries attend (padding sees no key, as HF)."""

    def __init__(self, half: int, tokens: Tensor, block: int, rows: Tensor | None = None) -> None:
        if rows is not None and tokens.dim() == 1:
            tokens = tokens.expand_as(rows)
        self.half, self.tokens, self.block, self.rows = half, tokens, block, rows
        self.per_batch = tokens.dim() == 2

    def allowed(self, q: Tensor, k: Tensor, length: int) -> Tensor:
        band = (q - k).abs() <= self.half
        g = self.tokens
        if not self.per_batch:
            return band | g[q] | g[k]
        keep = band | g[:, q] | g[:, k]  # (B, ...)
        return keep if self.rows is None else keep & self.rows[:, q]

    def allowed_at(self, b: Tensor, q: Tensor, k: Tensor, length: int) -> Tensor:
        if not self.per_batch:
            return self.allowed(q, k, length)
        keep = ((q - k).abs() <= self.half) | self.tokens[b, q] | self.tokens[b, k]
        return keep if self.rows is None else keep & self.rows[b, q]

    def layout(self, n_blocks: int, length: int) -> Tensor:
        band = band_layout(n_blocks, self.block, -self.half, self.half)
        cols = key_block_any(self.tokens.cpu(), n_blocks, self.block)  # (nb,) or (B, nb)
        if cols.dim() == 2:
            cols = cols.any(0)
        return band | cols[None, :]

    def band(self) -> tuple[int, Tensor | None]:
        return self.half, self.rows

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
        block: int | None = param(
            None, "block of the blocked path (null: window // 4, at least 16)", min=1
        )
        default_global: Literal["none", "first", "before_sep", "after_sep"] = param(
            "none",
            "global tokens when the batch gives no global_attention_mask: none, the first "
            "token (HF sequence classification), those before the first sep_token_id "
            "(question answering) or after the sep pair that follows it (multiple choice)",
        )
        sep_token_id: int | None = param(None, "the separator default_global looks for", min=0)
        zero_padded_queries: bool = param(
            False, "padded query rows attend to nothing and give zeros (HF Longformer)"
        )

    inputs = ("global_attention_mask",)

    def __init__(self, cfg: Any, dims: Any, *, cross: bool = False) -> None:
        super().__init__(cfg, dims, cross=cross)
        if cfg.global_projections:
            d, bias = dims.d_model, cfg.bias
            self.q_global = nn.Linear(d, self.q_dim, bias=bias)
            self.k_global = nn.Linear(d, self.kv_dim, bias=bias)
            self.v_global = nn.Linear(d, self.kv_dim, bias=bias)

    @classmethod
    def check(cls, cfg: Any, dims: Any) -> list[tuple[str, str]]:
        issues = super().check(cfg, dims)
        if cfg.default_global in ("before_sep", "after_sep") and cfg.sep_token_id is None:
            issues.append(("sep_token_id", f"default_global {cfg.default_global} needs it"))
        return issues

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
            ids = ctx.input_ids
            rows = per_batch.shape[0] if ids is None else ids.shape[0]
            if per_batch.dim() != 2 or tuple(per_batch.shape) != (rows, length):
                raise ValueError(
                    f"{GLOBAL_INPUT} must be ({rows}, {length}) like the input ids, "
                    f"got shape {tuple(per_batch.shape)}"
                )
            per_batch = per_batch.to(device=device) != 0
        elif ctx is not None and ctx.input_ids is not None and cfg.default_global != "none":
            per_batch = default_global(ctx.input_ids, cfg.default_global, cfg.sep_token_id)
        padding = None if ctx is None else ctx.mask.key_padding
        if padding is not None and padding.shape[-1] != length:
            padding = None  # keys of a cache: no padding of these queries to read
        if per_batch is not None:
            if padding is not None:
                per_batch = per_batch & padding.to(per_batch.device)  # padding is never global
            tokens = per_batch.to(device) | tokens
        rows = padding.to(device) if cfg.zero_padded_queries and padding is not None else None
        half = cfg.window // 2
        return LongformerPattern(half, tokens, cfg.block or max(half // 2, 16), rows)

    def global_qkv(
        self, x: Tensor, pattern: SparsePattern | None = None
    ) -> GlobalProjections | None:
        """The global projections of `x` for the global query rows of `pattern`."""
        if not self.cfg.global_projections:
            return None
        return GlobalProjections(self, x, pattern)


class GlobalProjections(GlobalQKV):
    """q/k/v_global of a Longformer layer's input x (B, T, d_model), applied when needed.

    With few global rows (n_heads * G < kv_dim) and plain softmax scores, `rows_attention`
    never projects the keys and values of every token: a global query q_h meets key
    Wk_h x_t + bk_h in q_h . Wk_h x_t + q_h . bk_h, where the second term is the same for
    every key (the softmax drops it), so scores are (q_h Wk_h) . x_t; and the rows' output
    sum_t p_t (Wv_h x_t + bv_h) is Wv_h (sum_t p_t x_t) + bv_h sum_t p_t. That is H * G
    rows of width d_model against x instead of two (T, d_model) x (d_model, kv_dim) products.
    """

    def __init__(self, attn: LongformerAttention, x: Tensor, pattern: SparsePattern | None):
        self.attn, self.x, self.pattern = attn, x, pattern

    def qkv(self) -> tuple[Tensor, Tensor, Tensor]:
        """q, k, v of the global projections; q is projected only at the pattern's global
        query rows (zeros elsewhere: only those rows read it), as HF does."""
        a, x, pattern = self.attn, self.x, self.pattern
        rows = None if pattern is None else pattern.global_queries(x.shape[1], x.device)
        if rows is None or pattern is None:
            q = a.q_global(x)
        else:
            rows = rows if rows.dim() == 2 else rows[None].expand(x.shape[0], -1)
            b_idx, g_idx = (rows >= 0).nonzero(as_tuple=True)
            t_idx = rows[b_idx, g_idx]
            q = x.new_zeros(*x.shape[:2], a.q_dim)  # (B, T, H*hd)
            q = q.index_put((b_idx, t_idx), a.q_global(x[b_idx, t_idx]))
        return (
            a._scale_query(a._heads(q, a.n_heads)),
            a._heads(a.k_global(x), a.n_kv),
            a._heads(a.v_global(x), a.n_kv),
        )

    def rows_attention(self, rows: Tensor, mask: AttentionMask, **scoring: Any) -> Tensor:
        a, x = self.attn, self.x
        B, T, d = x.shape
        H, hd = a.n_heads, a.head_dim
        plain = scoring.get("sinks") is None and scoring.get("softcap") is None
        if not plain or scoring.get("dropout_p") or H * rows.shape[1] >= a.kv_dim:
            return super().rows_attention(rows, mask, **scoring)
        G = rows.shape[1]
        at = rows.clamp(min=0)  # (B, G)
        q = a.q_global(x.gather(1, at[..., None].expand(B, G, d)))  # (B, G, H*hd)
        q = a._scale_query(q.view(B, G, H, hd).transpose(1, 2))  # (B, H, G, hd)
        group = H // a.n_kv
        wk, wv = (p.weight.view(a.n_kv, hd, d) for p in (a.k_global, a.v_global))
        q = q.reshape(B, a.n_kv, group * G, hd)  # (B, Hkv, group*G, hd): a kv head's queries
        qx = torch.matmul(q, wk).reshape(B, 1, H * G, d)  # (B, 1, H*G, d): q_h Wk_h
        xs = x[:, None]  # (B, 1, T, d): keys and values are x itself
        scale = scoring.get("scale") or hd**-0.5
        valid = rows >= 0  # (B, G)
        docs = mask.key_docs
        if mask.causal or mask.key_padding is not None or docs is not None or not bool(valid.all()):
            keep = valid[:, :, None].expand(B, G, T)  # (B, G, T): every key the mask allows
            if mask.causal:
                keep = keep & (torch.arange(T, device=x.device) <= at[:, :, None])
            if mask.key_padding is not None:
                keep = keep & mask.key_padding.bool()[:, None, :]
            if docs is not None:  # a global row sees its own document only
                keep = keep & (mask.query_docs.gather(1, at)[:, :, None] == docs[:, None, :])
            valid = keep.any(-1)  # (B, G) rows with some key (the others give zeros)
            keep = keep[:, None].expand(B, H, G, T).reshape(B, 1, H * G, T)
            px = masked_sdpa(qx, xs, xs, keep, scale=scale)  # (B, 1, H*G, d): sum_t p_t x_t
        else:
            everything = AttentionMask(H * G, T, device=x.device)  # no factor: every key
            px, _ = sdpa(qx, xs, xs, everything, Scoring(scale=scale))
        px = px.view(B, a.n_kv, group * G, d)
        out = torch.matmul(px, wv.transpose(-1, -2)).view(B, H, G, hd)  # Wv_h (sum_t p_t x_t)
        if a.v_global.bias is not None:
            bias = a.v_global.bias.view(H // group, 1, 1, hd).expand(-1, group, 1, -1)
            out = out + bias.reshape(H, 1, hd) * valid[:, None, :, None].to(out.dtype)
        return out


GLOBAL_INPUT = "global_attention_mask"  # the per-batch input's name (HF's argument name)


def default_global(ids: Tensor, rule: str, sep: int | None) -> Tensor:
    """(B, T) bool global tokens HF's task models set when given none: the first token, the
    question (before the first `sep`) or the choice (after the `sep sep` that follows it)."""
    pos = torch.arange(ids.shape[1], device=ids.device)
    if rule == "first":
        return (pos == 0).expand(ids.shape)
    is_sep = ids == sep
    if not bool(is_sep.any(-1).all()):
        raise ValueError(
            f"default_global {rule}: every row of input_ids needs the separator id {sep} "
            "(or pass global_attention_mask)"
        )
    first = is_sep.int().argmax(-1, keepdim=True)  # (B, 1) the question's end
    return pos < first if rule == "before_sep" else pos > first + 1


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
