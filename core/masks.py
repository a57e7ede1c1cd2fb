"""Attention masks as data: built once per forward, safe in every dtype, never NaN."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass
class AttentionMask:
    """Which keys each query may see.

    `keep` is None when every query sees every key (or only the causal triangle, when
    `is_causal`); otherwise a bool (B, 1, Tq, Tk) tensor, True where attention is allowed.
    Rows with no allowed key are opened to all keys and flagged in `empty_rows`, so the
    softmax stays finite and the output of those rows is set to zero.
    """

    keep: Tensor | None
    is_causal: bool
    empty_rows: Tensor | None  # (B, 1, Tq, 1) bool, True where a query saw no key
    causal: bool | None = None  # the factors `keep` was built from, for sparse attention
    key_padding: Tensor | None = None  # (B, Tk) bool, True for real tokens

    @classmethod
    def build(
        cls,
        q_len: int,
        k_len: int,
        *,
        causal: bool,
        key_padding: Tensor | None = None,
        device: torch.device | None = None,
    ) -> AttentionMask:
        """Mask for `q_len` queries that are the last `q_len` of `k_len` keys when causal.

        key_padding: (B, Tk) with 1/True for real tokens and 0/False for padding.
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
        if key_padding is None:
            if not causal:
                return cls(None, False, None, causal=False)
            if q_len == k_len:
                return cls(None, True, None, causal=True)
        keep = None
        if causal:
            keep = causal_mask(q_len, k_len, device=device)[None, None]  # (1, 1, Tq, Tk)
        if key_padding is not None:
            pad = key_padding[:, None, None, :]  # (B, 1, 1, Tk)
            keep = pad if keep is None else keep & pad
        keep = keep.expand(keep.shape[0], 1, q_len, k_len)
        mask = cls.from_keep(keep)
        mask.causal, mask.key_padding = causal, key_padding
        return mask

    @classmethod
    def from_keep(cls, keep: Tensor) -> AttentionMask:
        """Wrap a bool (B, 1, Tq, Tk) keep tensor, opening rows that see no key."""
        empty = ~keep.any(dim=-1, keepdim=True)  # (B, 1, Tq, 1)
        return cls(keep | empty, False, empty)

    def sdpa_mask(self, bias: Tensor | None, dtype: torch.dtype) -> Tensor | None:
        """The `attn_mask` for scaled_dot_product_attention, with an optional score bias."""
        if bias is None:
            return self.keep
        bias = bias.to(dtype)
        if self.keep is None and not self.is_causal:
            return bias
        keep = self.keep
        if keep is None:  # causal, no padding: materialise the triangle to add the bias
            q_len, k_len = bias.shape[-2:]
            keep = causal_mask(q_len, k_len, device=bias.device)
        return bias.masked_fill(~keep, torch.finfo(dtype).min)

    def use_is_causal(self, bias: Tensor | None) -> bool:
        return self.is_causal and bias is None

    def zero_empty_rows(self, out: Tensor) -> Tensor:
        """Zero the outputs of queries that had no key to attend to. out: (B, H, Tq, hd)."""
        if self.empty_rows is None:
            return out
        return out.masked_fill(self.empty_rows, 0.0)


def causal_mask(q_len: int, k_len: int, *, device: torch.device | None = None) -> Tensor:
    """Bool (Tq, Tk): query i (the (k_len - q_len + i)-th position) sees keys up to itself."""
    offset = k_len - q_len
    q = torch.arange(q_len, device=device)[:, None] + offset
    k = torch.arange(k_len, device=device)[None, :]
    return k <= q
