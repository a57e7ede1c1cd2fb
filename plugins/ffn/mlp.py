"""Position-wise feed-forward: Linear -> activation -> Linear (Vaswani et al., 2017)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from torch import Tensor, nn

from archzoo.component import param
from archzoo.interfaces import FeedForward

from .activations import ACTIVATIONS


class MLPFeedForward(FeedForward):
    name = "mlp"
    summary = "two-layer MLP: d_model -> d_ff -> activation -> d_model"

    @dataclass
    class Config:
        activation: Literal["relu", "gelu", "gelu_tanh", "silu"] = param(
            "gelu", "non-linearity between the two projections"
        )
        bias: bool = param(True, "biases on both projections")
        inner_dropout: float = param(0.0, "dropout after the activation", min=0.0, lt=1.0)

    def __init__(self, cfg: Any, dims: Any) -> None:
        super().__init__(cfg, dims)
        self.fc_in = nn.Linear(dims.d_model, dims.d_ff, bias=cfg.bias)
        self.fc_out = nn.Linear(dims.d_ff, dims.d_model, bias=cfg.bias)
        self.act = ACTIVATIONS[cfg.activation]
        self.dropout = nn.Dropout(cfg.inner_dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc_out(self.dropout(self.act(self.fc_in(x))))
