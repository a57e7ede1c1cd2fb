"""Gated feed-forward (Shazeer, 2020): down(act(gate(x)) * up(x))."""

from __future__ import annotations

from typing import Any, Literal

from torch import Tensor, nn

from archzoo.parts.component import param
from archzoo.parts.interfaces import FeedForward

from .activations import ACTIVATIONS

GATES = {
    "swiglu": "silu",
    "geglu": "gelu",
    "geglu_tanh": "gelu_tanh",
    "geglu_new": "gelu_new",  # T5 v1.1's tanh-GELU op by op: its bf16 bits
    "reglu": "relu",
}


class GLUFeedForward(FeedForward, name="glu"):
    """gated linear unit FFN (SwiGLU, GeGLU, ReGLU): down(act(gate(x)) * up(x))"""

    class Config:
        activation: Literal["swiglu", "geglu", "geglu_tanh", "geglu_new", "reglu"] = param(
            "swiglu",
            "gate: swiglu=SiLU, geglu=GELU, geglu_tanh=tanh-GELU, geglu_new=tanh-GELU op by op"
            " (T5 v1.1's gelu_new), reglu=ReLU",
        )
        bias: bool = param(False, "biases on the three projections")
        down_bias: bool | None = param(
            None, "a bias on the down projection (null: as `bias`; GTE: true, gate and up none)"
        )
        inner_dropout: float = param(0.0, "dropout on the gated product", min=0.0, lt=1.0)
        gate_scale: float = param(
            1.0, "multiply the gate projection by this before the activation (muP)"
        )
        output_scale: float = param(1.0, "multiply the output by this (muP)")

    def __init__(self, cfg: Any, dims: Any) -> None:
        super().__init__(cfg, dims)
        self.gate = nn.Linear(dims.d_model, dims.d_ff, bias=cfg.bias)
        self.up = nn.Linear(dims.d_model, dims.d_ff, bias=cfg.bias)
        down_bias = cfg.bias if cfg.down_bias is None else cfg.down_bias
        self.down = nn.Linear(dims.d_ff, dims.d_model, bias=down_bias)
        self.act = ACTIVATIONS[GATES[cfg.activation]]
        self.dropout = nn.Dropout(cfg.inner_dropout)

    def forward(self, x: Tensor) -> Tensor:
        gate = self.gate(x)
        if self.cfg.gate_scale != 1.0:
            gate = gate * self.cfg.gate_scale
        h = self.act(gate) * self.up(x)  # (B, T, d_ff)
        out = self.down(self.dropout(h) if self.dropout.training else h)
        return out if self.cfg.output_scale == 1.0 else out * self.cfg.output_scale
