"""Position-wise feed-forward: Linear -> activation -> Linear (Vaswani et al., 2017)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from archzoo.parts.component import param
from archzoo.parts.interfaces import FeedForward
from archzoo.parts.linear import make_linear

from .activations import ACTIVATIONS
from .xielu import XIELU


class MLPFeedForward(FeedForward, name="mlp"):
    """two-layer MLP: d_model -> d_ff -> activation -> d_model"""

    class Config:
        activation: Literal[
            "relu",
            "relu_squared",
            "gelu",
            "gelu_tanh",
            "gelu_new",
            "gelu_bloom",
            "quick_gelu",
            "silu",
            "xielu",
        ] = param("gelu", "non-linearity between the two projections (xielu: learns two scalars)")
        bias: bool = param(True, "biases on both projections")
        bias_add: Literal["fused", "after_matmul"] = param(
            "fused",
            "where the biases are added: inside the matmul (F.linear) or after it, "
            "x @ W.T + b, the product rounded first in 16-bit floats (Falcon)",
        )
        inner_dropout: float = param(0.0, "dropout after the activation", min=0.0, lt=1.0)
        in_groups: int = param(
            1,
            "the first projection block-diagonal in this many groups, each group of outputs "
            "from its own inputs only (a grouped 1x1 convolution, SqueezeBERT)",
            min=1,
        )
        out_groups: int = param(
            1, "the second projection block-diagonal in this many groups", min=1
        )

    @classmethod
    def check(cls, cfg: Any, dims: Any) -> list[tuple[str, str]]:
        """Each group count divides both widths of its projection."""
        for name in ("in_groups", "out_groups"):
            g = getattr(cfg, name)
            if dims.d_model % g or dims.d_ff % g:
                problem = f"{g} groups do not divide d_model {dims.d_model} and d_ff {dims.d_ff}"
                return [(name, problem)]
        return []

    def __init__(self, cfg: Any, dims: Any) -> None:
        super().__init__(cfg, dims)
        linear = partial(make_linear, bias=cfg.bias, bias_add=cfg.bias_add)
        self.fc_in = linear(dims.d_model, dims.d_ff, groups=cfg.in_groups)
        self.fc_out = linear(dims.d_ff, dims.d_model, groups=cfg.out_groups)
        # xielu: a module with parameters of its own (ffn.act.alpha_p, ...)
        self.act = XIELU() if cfg.activation == "xielu" else ACTIVATIONS[cfg.activation]
        self.dropout = nn.Dropout(cfg.inner_dropout)

    def forward(self, x: Tensor) -> Tensor:
        h = self.fc_in(x)  # (B, T, d_ff)
        if (
            torch.is_grad_enabled()
            and (self.dropout.p == 0.0 or not self.training)
            and not torch.is_autocast_enabled(h.device.type)
            and not torch.compiler.is_compiling()  # compiled graphs plan recomputation
            and not isinstance(self.act, nn.Module)  # its parameters need their gradients
            and self.cfg.out_groups == 1  # a dense fc_out (F.linear)
        ):
            # keep only h for backward; act(h) is recomputed there (one d_ff tensor less)
            bias = self.fc_out.bias
            if bias is None or self.cfg.bias_add == "fused":
                return _ActLinear.apply(h, self.fc_out.weight, bias, self.act)
            return _ActLinear.apply(h, self.fc_out.weight, None, self.act) + bias
        a = self.act(h)
        return self.fc_out(self.dropout(a) if self.dropout.training else a)


class _ActLinear(torch.autograd.Function):
    """linear(act(h), W, b) that saves h, not act(h), and recomputes the activation."""

    @staticmethod
    def forward(
        ctx: Any, h: Tensor, weight: Tensor, bias: Tensor | None, act: Callable[[Tensor], Tensor]
    ) -> Tensor:
        ctx.save_for_backward(h, weight)
        ctx.act, ctx.has_bias = act, bias is not None
        return F.linear(act(h), weight, bias)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:
        h, weight = ctx.saved_tensors
        higher = torch.is_grad_enabled()  # create_graph: keep these gradients differentiable
        with torch.enable_grad():
            h_in = h if higher and h.requires_grad else h.detach().requires_grad_()
            a = ctx.act(h_in)  # (..., d_ff), recomputed
        grad_h = grad_w = grad_b = None
        if ctx.needs_input_grad[0]:
            grad_a = grad @ weight  # (..., d_ff)
            grad_h = torch.autograd.grad(a, h_in, grad_a, create_graph=higher)[0]
        if ctx.needs_input_grad[1]:
            rows = grad.reshape(-1, grad.shape[-1])  # (N, d_model)
            a_rows = (a if higher else a.detach()).reshape(-1, a.shape[-1])  # (N, d_ff)
            grad_w = rows.t() @ a_rows  # (d_model, d_ff)
        if ctx.has_bias and ctx.needs_input_grad[2]:
            grad_b = grad.reshape(-1, grad.shape[-1]).sum(0)
        return grad_h, grad_w, grad_b, None
