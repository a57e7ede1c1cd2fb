"""Sequence pooling (first token, mean, max, last real token) and the optional pooler
(dense + activation, then a norm) that heads put before their output layer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import Tensor, nn

from archzoo.component import param
from archzoo.interfaces import Head, NormFactory

from ..ffn.activations import ACTIVATIONS


def pool(hidden: Tensor, attention_mask: Tensor | None, how: str) -> Tensor:
    """(B, T, D) -> (B, D)."""
    if how == "cls":
        return hidden[:, 0]
    if attention_mask is None:
        attention_mask = torch.ones(hidden.shape[:2], dtype=torch.bool, device=hidden.device)
    m = attention_mask.to(hidden.dtype)[..., None]  # (B, T, 1)
    if how == "mean":
        return (hidden * m).sum(1) / m.sum(1).clamp_min(1.0)
    if how == "max":  # padding never wins (sentence-transformers' max pooling)
        return hidden.masked_fill(m == 0, torch.finfo(hidden.dtype).min).amax(1)
    # last real token: highest index with mask 1 (works for left and right padding)
    idx = torch.arange(hidden.shape[1], device=hidden.device)
    last = (attention_mask.to(torch.long) * idx).argmax(dim=1)  # (B,)
    return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]


@dataclass
class PoolerConfig:
    """The parameters of a head's optional pooler."""

    pooler: bool = param(True, "dense + activation on the pooled vector (BERT's pooler)")
    pooler_activation: Literal["tanh", "relu", "gelu", "gelu_tanh"] = param(
        "tanh", "the pooler's non-linearity (DistilBERT: relu, ELECTRA: gelu)"
    )
    pooler_bias: bool = param(True, "a bias on the pooler's dense layer")
    pooler_norm: bool = param(False, "the spec's norm after the activation (ModernBERT)")


class PooledHead(Head):
    """A head whose output layer may read through a pooler (`PoolerConfig`)."""

    def __init__(
        self, cfg: Any, dims: Any, *, make_norm: NormFactory | None = None, **_: Any
    ) -> None:
        super().__init__(cfg, dims)
        d = dims.d_model
        self.pooler = nn.Linear(d, d, bias=cfg.pooler_bias) if cfg.pooler else None
        norm = cfg.pooler and cfg.pooler_norm
        if norm and make_norm is None:
            raise ValueError(f"head {self.name!r}: pooler_norm needs the model's norm factory")
        self.pooler_norm = make_norm() if norm else None

    def transform(self, x: Tensor) -> Tensor:
        """The pooler applied to x (..., D), or x itself without one."""
        if self.pooler is None:
            return x
        x = ACTIVATIONS[self.cfg.pooler_activation](self.pooler(x))
        return x if self.pooler_norm is None else self.pooler_norm(x)


@dataclass
class TokenPoolerConfig(PoolerConfig):
    """The pooler of a per-token head: off unless the checkpoint has one."""

    pooler: bool = param(False, "dense + activation on every token first (ModernBERT's head)")
