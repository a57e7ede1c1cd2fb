"""Gated feed-forward (Shazeer, 2020): down(act(gate(x)) * up(x))."""

from __future__ import annotations

from typing import Any, Literal

from torch import Tensor, nn

from archzoo.parts.component import param
from archzoo.parts.interfaces import FeedForward, NormFactory

from .activations import ACTIVATIONS

GATES = {
    "swiglu": "silu",
    "geglu": "gelu",
    "geglu_tanh": "gelu_tanh",
    "geglu_new": "gelu_new",  # T5 v1.1's tanh-GELU op by op: its bf16 bits
    "reglu": "relu",
    "reglu_squared": "relu_squared",  # relu(gate)^2 * up (BitNet's relu2)
}


class GLUFeedForward(FeedForward, name="glu"):
    """gated linear unit FFN (SwiGLU, GeGLU, ReGLU): down(act(gate(x)) * up(x))"""

    class Config:
        activation: Literal[
            "swiglu", "geglu", "geglu_tanh", "geglu_new", "reglu", "reglu_squared"
        ] = param(
            "swiglu",
            "gate: swiglu=SiLU, geglu=GELU, geglu_tanh=tanh-GELU, geglu_new=tanh-GELU op by op"
            " (T5 v1.1's gelu_new), reglu=ReLU, reglu_squared=ReLU squared (BitNet)",
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
        inner_norm: bool = param(
            False,
            "normalise the gated product (d_ff wide) with the spec's norm before the down "
            "projection (BitNet's ffn_sub_norm)",
        )

    def __init__(self, cfg: Any, dims: Any, *, make_norm: NormFactory | None = None) -> None:
        super().__init__(cfg, dims)
        self.gate = nn.Linear(dims.d_model, dims.d_ff, bias=cfg.bias)
        self.up = nn.Linear(dims.d_model, dims.d_ff, bias=cfg.bias)
        down_bias = cfg.bias if cfg.down_bias is None else cfg.down_bias
        self.down = nn.Linear(dims.d_ff, dims.d_model, bias=down_bias)
        self.act = ACTIVATIONS[GATES[cfg.activation]]
        self.dropout = nn.Dropout(cfg.inner_dropout)
        self.inner_norm = None
        if cfg.inner_norm:
            if make_norm is None:
                raise ValueError("inner_norm needs the spec's norm factory (make_norm)")
            self.inner_norm = make_norm(dims.d_ff)

    def forward(self, x: Tensor) -> Tensor:
        gate = self.gate(x)
        if self.cfg.gate_scale != 1.0:
            gate = gate * self.cfg.gate_scale
        h = self.act(gate) * self.up(x)  # (B, T, d_ff)
        if self.inner_norm is not None:
            h = self.inner_norm(h)
        out = self.down(self.dropout(h) if self.dropout.training else h)
        return out if self.cfg.output_scale == 1.0 else out * self.cfg.output_scale
