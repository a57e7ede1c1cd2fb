"""Attention masks as factors: causal, query offset, key padding, documents and a sparse pattern.

A mask keeps the factors it is made of and materialises, on demand and once per forward
(the result is cached on the mask, which lives for one forward), whatever an execution
path needs: a bool keep tensor (`dense`), the arguments of scaled_dot_product_attention
(`sdpa`), or a FlexAttention `BlockMask` (`block_mask`). Invariant: a query row with no
visible key is opened to every key before the softmax (so it stays finite in any dtype)
and its output is set to zero (`zero_empty_rows`), never NaN.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor


class Pattern:
    """Which keys each query may attend to, as a predicate plus a block layout covering it.

    Positions are absolute (a query at decoding step 57 is position 57). The causal and
    padding factors are applied by the mask, not by the pattern.
    """

    block: int = 64  # size of the query/key blocks of the layout
    per_batch: bool = False  # the predicate has a leading batch dimension

    def allowed(self, q: Tensor, k: Tensor, length: int) -> Tensor:
        """Bool, True where query position q may see key position k (broadcast; a per-batch
        pattern adds a leading batch dim). `length` is the number of keys in the sequence."""
        raise NotImplementedError

    def allowed_at(self, b: Tensor, q: Tensor, k: Tensor, length: int) -> Tensor:
        """The predicate at one (batch, query, key) triple (FlexAttention's mask_mod)."""
        return self.allowed(q, k, length)

    def layout(self, n_blocks: int, length: int) -> Tensor:
        """Bool (nb, nb): key blocks each query block needs. It must cover every allowed
        pair whose query is not a global query; it may cover more."""
        raise NotImplementedError

    def global_queries(self, length: int, device: torch.device) -> Tensor | None:
        """Queries that attend to every key, computed densely on their own: (G,) or (B, G)
        positions with -1 for none, or None. `layout` need not cover their rows."""
        return None

    def band(self) -> tuple[int, Tensor | None] | None:
        """(half, rows) when `allowed` is exactly: |q - k| <= half, or q or k one of
        `global_queries`, for the queries `rows` (B, T) bool lets attend (None: all); else
        None. Such a pattern runs on the band path (plugins/attention/band.py)."""
        return None


class AttentionMask:
    """Which keys each of `q_len` queries may see among `k_len` keys, kept as factors.

    causal: query i (absolute position q_offset + i) sees keys up to itself.
    q_offset: position of the first query among the keys (k_len - q_len by default: the
        queries are the newest tokens, as in incremental decoding).
    key_padding: (B, Tk) bool, True for real tokens, or None when every key is real.
    pattern: a `Pattern` (sparse attention), or None.
    keep: an explicit (B or 1, 1, Tq, Tk) bool factor (`from_keep`), or None.
    key_docs: (B, Tk) document of each key in a packed row (archzoo.model.documents), or None;
        a query sees only keys of its own document, `query_docs` (B, Tq) (default: the
        keys' documents at the queries' positions; cross-attention gives the decoder's).
    """

    def __init__(
        self,
        q_len: int,
        k_len: int,
        *,
        causal: bool = False,
        q_offset: int | None = None,
        key_padding: Tensor | None = None,
        pattern: Pattern | None = None,
        keep: Tensor | None = None,
        key_docs: Tensor | None = None,
        query_docs: Tensor | None = None,
        device: torch.device | None = None,
    ) -> None:
        self.q_len, self.k_len = q_len, k_len
        self.causal = causal
        self.q_offset = k_len - q_len if q_offset is None else q_offset
        self.key_padding = key_padding
        self.pattern = pattern
        self.explicit = keep
        self.key_docs = key_docs
        self.own_docs = query_docs is None  # queries are among the keys: each sees itself
        if key_docs is not None and query_docs is None:
            query_docs = key_docs[:, self.q_offset : self.q_offset + q_len]
        self.query_docs = query_docs
        self.device = device
        self._made: dict[Any, Any] = {}  # what has been materialised (one forward's life)
        self.shared: dict[Any, Any] = {}  # materialisations without the pattern (see with_pattern)

    @classmethod
    def build(
        cls,
        q_len: int,
        k_len: int,
        *,
        causal: bool,
        key_padding: Tensor | None = None,
        device: torch.device | None = None,
        pattern: Pattern | None = None,
        key_docs: Tensor | None = None,
        query_docs: Tensor | None = None,
    ) -> AttentionMask:
        """Mask for `q_len` queries that are the last `q_len` of `k_len` keys.

        key_padding: (B, Tk) with 1/True for real tokens and 0/False for padding.
        key_docs, query_docs: documents of packed rows (see the class).
        """
        if key_padding is not None:
            if key_padding.dim() != 2 or key_padding.shape[1] != k_len:
                raise ValueError(
                    f"attention_mask must have shape (batch, {k_len}), "
                    f"got {tuple(key_padding.shape)}"
                )
            key_padding = key_padding.to(device=device, dtype=torch.bool)
            # eager only: a data-dependent branch would break a compiled graph
            if not torch.compiler.is_compiling() and bool(key_padding.all()):
                key_padding = None
        return cls(
            q_len,
            k_len,
            causal=causal,
            key_padding=key_padding,
            pattern=pattern,
            key_docs=key_docs,
            query_docs=query_docs,
            device=device,
        )

    @classmethod
    def from_keep(cls, keep: Tensor) -> AttentionMask:
        """A mask whose only factor is a bool (B or 1, 1, Tq, Tk) keep tensor."""
        return cls(keep.shape[-2], keep.shape[-1], keep=keep, device=keep.device)

    def with_pattern(self, pattern: Pattern) -> AttentionMask:
        """The same factors plus a sparse pattern (made once per forward and pattern)."""
        try:
            key = ("pattern", pattern)
            made = self._made.get(key)
        except TypeError:  # an unhashable pattern: no reuse
            key, made = None, None
        if made is None:
            made = AttentionMask(
                self.q_len,
                self.k_len,
                causal=self.causal,
                q_offset=self.q_offset,
                key_padding=self.key_padding,
                pattern=pattern,
                keep=self.explicit,
                key_docs=self.key_docs,
                query_docs=None if self.own_docs else self.query_docs,
                device=self.device,
            )
            made.shared = self.shared  # every layer's pattern mask shares what needs no pattern
            if key is not None:
                self._made[key] = made
        return made

    # ------------------------------------------------------------ what the factors say

    @property
    def masks_nothing(self) -> bool:
        """Every query sees every key (a causal factor binds nothing when every query is at or
        after the last key: one new token per step when decoding)."""
        return not self.causal_binds and self.restricts_only_causally

    @property
    def causal_binds(self) -> bool:
        """The causal factor hides some key from some query."""
        return self.causal and self.q_offset < self.k_len - 1

    @property
    def restricts_only_causally(self) -> bool:
        """No padding, document, pattern or explicit factor (the causal factor may be set)."""
        return (
            self.key_padding is None
            and self.pattern is None
            and self.explicit is None
            and self.key_docs is None
        )

    def same_document(self) -> Tensor | None:
        """(B, Tq, Tk) bool: the key is in the query's document; None without documents."""
        if self.key_docs is None:
            return None
        if "documents" not in self._made:
            self._made["documents"] = self.query_docs[:, :, None] == self.key_docs[:, None, :]
        return self._made["documents"]

    @property
    def sdpa_causal(self) -> bool:
        """SDPA's is_causal gives exactly this mask (square, causal, nothing else)."""
        return self.causal and self.restricts_only_causally and self.q_len == self.k_len

    def query_positions(self) -> Tensor:
        """(Tq,) absolute position of each query among the keys."""
        return torch.arange(self.q_offset, self.q_offset + self.q_len, device=self.device)

    def query_valid(self, batch: int) -> Tensor:
        """(B, Tq) bool: the queries that are real tokens (padding factor at their positions)."""
        if self.key_padding is None:
            return torch.ones(batch, self.q_len, dtype=torch.bool, device=self.device)
        return self.key_padding[:, self.q_offset : self.q_offset + self.q_len]

    # ------------------------------------------------------------ materialisations

    def allowed(self) -> Tensor | None:
        """Bool (B or 1, 1, Tq, Tk) of the factors combined, empty rows not opened; None when
        nothing is masked."""
        if "allowed" in self._made:
            return self._made["allowed"]
        keep = None
        if not self.masks_nothing:
            q = self.query_positions()[:, None]  # (Tq, 1)
            k = torch.arange(self.k_len, device=self.device)[None, :]  # (1, Tk)
            keep = torch.ones(1, self.q_len, self.k_len, dtype=torch.bool, device=self.device)
            if self.pattern is not None:
                keep = keep & self.pattern.allowed(q, k, self.k_len)  # (B or 1, Tq, Tk)
            if self.causal_binds:
                keep = keep & (k <= q)
            if self.key_padding is not None:
                keep = keep & self.key_padding.to(torch.bool)[:, None, :]  # (B, Tq, Tk)
            if self.key_docs is not None:
                keep = keep & self.same_document()  # (B, Tq, Tk)
            keep = keep[:, None]  # (B or 1, 1, Tq, Tk)
            if self.explicit is not None:
                keep = keep & self.explicit
        self._made["allowed"] = keep
        return keep

    def empty(self) -> Tensor | None:
        """(B or 1, 1, Tq, 1) bool, True for queries with no visible key; None if none can be."""
        if "empty" not in self._made:
            # every query sees itself when only causal and document factors (self-attention):
            # decided without the dense (Tq, Tk) mask, which SDPA's is_causal never needs
            only_own = self.key_padding is None and self.pattern is None and self.explicit is None
            keep = None if only_own and self.own_docs and self.q_offset >= 0 else self.allowed()
            self._made["empty"] = None if keep is None else ~keep.any(dim=-1, keepdim=True)
        return self._made["empty"]

    def dense(self) -> Tensor | None:
        """Bool (B or 1, 1, Tq, Tk) keep mask with empty rows opened; None if nothing is masked."""
        if "dense" not in self._made:
            keep, empty = self.allowed(), self.empty()
            self._made["dense"] = keep if empty is None else keep | empty
        return self._made["dense"]

    def sdpa(self, bias: Tensor | None = None, dtype: torch.dtype | None = None) -> dict:
        """Keyword arguments `attn_mask` and `is_causal` for scaled_dot_product_attention.

        bias: an additive score term (B or 1, H, Tq, Tk) folded into the mask (cast to
        `dtype`, the query dtype; masked scores get the dtype's lowest finite value).
        """
        if bias is None:  # the same for every layer of a forward: made once
            made = self._made.get("sdpa")
            if made is None:
                if self.sdpa_causal:  # a branch: under dynamic shapes it is a SymBool
                    made = {"attn_mask": None, "is_causal": True}
                else:
                    made = {"attn_mask": self.dense(), "is_causal": False}
                self._made["sdpa"] = made
            return dict(made)
        bias = bias.to(dtype or bias.dtype)
        keep = self.dense()
        if keep is None:
            return {"attn_mask": bias, "is_causal": False}
        return {
            "attn_mask": bias.masked_fill(~keep, torch.finfo(bias.dtype).min),
            "is_causal": False,
        }

    def zero_empty_rows(self, out: Tensor) -> Tensor:
        """Zero the outputs of queries that had no key to attend to. out: (B, H, Tq, hd)."""
        empty = self.empty()
        return out if empty is None else out.masked_fill(empty, 0.0)

    def block_mask(self, batch: int | None = None) -> Any:
        """A FlexAttention BlockMask of the factors (per batch when padding or the pattern
        needs it; `batch` sizes a per-batch pattern without padding)."""
        key = ("block_mask", batch)
        if key not in self._made:
            from torch.nn.attention.flex_attention import create_block_mask

            per_batch = self.key_padding is not None or self.explicit is not None
            per_batch = per_batch or self.key_docs is not None
            per_batch = per_batch or getattr(self.pattern, "per_batch", False)
            if per_batch and batch is None:
                rows = (self.key_padding, self.key_docs, self.explicit)
                batch = next(t for t in rows if t is not None).shape[0]
            self._made[key] = create_block_mask(
                self.mask_mod(),
                batch if per_batch else None,
                None,
                self.q_len,
                self.k_len,
                device=self.device,
            )
        return self._made[key]

    def mask_mod(self) -> Any:
        """The factors as FlexAttention's mask_mod(b, h, q_idx, kv_idx) -> bool."""
        offset, k_len = self.q_offset, self.k_len
        pattern, causal, pad, explicit = self.pattern, self.causal, self.key_padding, self.explicit
        q_docs, k_docs = self.query_docs, self.key_docs

        def mask_mod(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
            qi = q_idx + offset
            ok = kv_idx >= 0
            if pattern is not None:
                ok = ok & pattern.allowed_at(b, qi, kv_idx, k_len)
            if causal:
                ok = ok & (kv_idx <= qi)
            if pad is not None:
                ok = ok & pad[b, kv_idx]
            if explicit is not None:
                ok = ok & explicit[b if explicit.shape[0] > 1 else 0, 0, q_idx, kv_idx]
            if k_docs is not None:
                ok = ok & (q_docs[b, q_idx] == k_docs[b, kv_idx])
            return ok

        return mask_mod


def causal_mask(q_len: int, k_len: int, *, device: torch.device | None = None) -> Tensor:
    """Bool (Tq, Tk): query i (the (k_len - q_len + i)-th position) sees keys up to itself."""
    offset = k_len - q_len
    q = torch.arange(q_len, device=device)[:, None] + offset
    k = torch.arange(k_len, device=device)[None, :]
    return k <= q
