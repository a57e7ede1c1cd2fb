"""Language adapters (X-MOD, Pfeiffer et al., 2022): one bottleneck MLP per language, each
row (or token) through the adapter of its language id."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class StackedLinear(nn.Module):
    """n linear maps d_in -> d_out stacked: weight (n, d_out, d_in), bias (n, d_out)."""

    def __init__(self, n: int, d_in: int, d_out: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n, d_out, d_in))
        self.bias = nn.Parameter(torch.zeros(n, d_out))
        nn.init.normal_(self.weight, std=0.02)

    def init_weights(self, std: float) -> None:
        nn.init.normal_(self.weight, std=std)
        nn.init.zeros_(self.bias)


class LanguageAdapters(nn.Module):
    """x (B, T, D) -> adapter_l(x) where l is each position's language id: d_model ->
    d_adapter -> activation -> d_model, a separate pair of maps per language."""

    def __init__(self, n: int, d_model: int, d_adapter: int, act: Callable[[Tensor], Tensor]):
        super().__init__()
        self.n, self.act = n, act
        self.fc_in = StackedLinear(n, d_model, d_adapter)
        self.fc_out = StackedLinear(n, d_adapter, d_model)

    def forward(self, x: Tensor, lang_ids: Tensor) -> Tensor:
        """lang_ids: (B,) a language per row or (B, T) per token, each in [0, n)."""
        B, T, _ = x.shape
        ids = lang_ids[:, None].expand(B, T) if lang_ids.dim() == 1 else lang_ids  # (B, T)
        if ids.shape != (B, T):
            raise ValueError(
                f"lang_ids of shape {tuple(lang_ids.shape)} fits neither (batch,) = ({B},) "
                f"nor (batch, seq) = ({B}, {T})"
            )
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= self.n):
            raise ValueError(f"lang_ids must lie in [0, {self.n}) (one per language adapter)")
        out = torch.zeros_like(x)
        for lang in range(self.n):
            sel = ids == lang  # (B, T)
            if not sel.any():
                continue
            h = F.linear(x[sel], self.fc_in.weight[lang], self.fc_in.bias[lang])  # (N, A)
            out[sel] = F.linear(self.act(h), self.fc_out.weight[lang], self.fc_out.bias[lang])
        return out
