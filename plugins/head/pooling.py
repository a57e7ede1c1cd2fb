"""Sequence pooling (first token, mean, max, last real token, the row's last place padding
or not, last place of a token id: BART's and T5's <eos>) and the optional pooler (dense + activation, then a norm) that heads
put before their output layer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import Tensor, nn

from archzoo.parts.component import param
from archzoo.parts.interfaces import Head, NormFactory

from ..ffn.activations import ACTIVATIONS


def pool(hidden: Tensor, attention_mask: Tensor | None, how: str) -> Tensor:
    """(B, T, D) -> (B, D)."""
    if how == "cls":
        return hidden[:, 0]
    if how == "end":  # the row's last place, a pad or not (RoFormer's sequence summary)
        return hidden[:, -1]
    if attention_mask is None:
        attention_mask = torch.ones(hidden.shape[:2], dtype=torch.bool, device=hidden.device)
    m = attention_mask.to(hidden.dtype)[..., None]  # (B, T, 1)
    if how == "mean":
        return (hidden * m).sum(1) / m.sum(1).clamp_min(1.0)
    if how == "max":  # padding never wins (sentence-transformers' max pooling)
        return hidden.masked_fill(m == 0, torch.finfo(hidden.dtype).min).amax(1)
    return at_last(hidden, attention_mask.bool())  # the last real token (either padding side)


def at_last(hidden: Tensor, hits: Tensor) -> Tensor:
    """(B, T, D) states at each row's highest index where hits (B, T) is true -> (B, D)."""
    idx = torch.arange(hidden.shape[1], device=hidden.device)
    last = torch.where(hits, idx, -1).amax(dim=1).clamp_min(0)  # (B,)
    return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]


def pool_at_token(hidden: Tensor, input_ids: Tensor | None, token: int) -> Tensor:
    """(B, T, D) -> (B, D): the state at each row's last `token` in input_ids; every row
    must hold it equally often (transformers' BART/T5 classification refuses otherwise)."""
    if input_ids is None:
        raise ValueError(f"pooling: eos reads where token {token} is in input_ids; pass them")
    if input_ids.shape != hidden.shape[:2]:
        raise ValueError(
            f"pooling: eos reads token {token} in input_ids {tuple(input_ids.shape)} but the "
            f"states to pool are {tuple(hidden.shape[:2])}: an encoder-decoder pools decoder "
            "states, so decoder_input_ids must be input_ids shifted right (as transformers "
            "makes them)"
        )
    hits = input_ids == token  # (B, T)
    if not torch.compiler.is_compiling() and hits.device.type != "meta":
        counts = hits.sum(dim=1).tolist()
        if min(counts) == 0:
            raise ValueError(
                f"pooling: eos: row {counts.index(0)} of input_ids has no token {token}"
            )
        if len(set(counts)) > 1:
            raise ValueError(
                f"pooling: eos: every row of input_ids must hold token {token} equally often "
                f"(as transformers requires); the rows hold it {counts} times"
            )
    return at_last(hidden, hits)


@dataclass
class PoolerConfig:
    """The parameters of a head's optional pooler."""

    pooler: bool = param(True, "dense + activation on the pooled vector (BERT's pooler)")
    pooler_activation: Literal["tanh", "relu", "gelu", "gelu_tanh", "gelu_new"] = param(
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
