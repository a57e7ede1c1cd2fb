"""Activation functions by name, shared by the feed-forward and head components."""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def gelu_new(x: Tensor) -> Tensor:
    """GELU's tanh approximation (Hendrycks & Gimpel, 2016) as GPT-2's checkpoints were
    trained with it: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), one op at a time.

    In 16-bit floats every op rounds, so the op order is part of the numbers: this order is
    transformers' `gelu_new`, and outputs are bit-identical to it (F.gelu rounds once and
    differs in the last bit, which changes greedy tokens of bf16 models). In fp32 and fp64
    a rounding more or less is invisible, and F.gelu's one kernel is 4x faster.
    """
    if x.element_size() >= 4:
        return F.gelu(x, approximate="tanh")
    if torch.is_grad_enabled() and x.requires_grad:
        return 0.5 * x * (1.0 + torch.tanh(SQRT_2_OVER_PI * (x + 0.044715 * torch.pow(x, 3.0))))
    # no graph to keep: the same ops in place, one buffer instead of eight (decoding)
    t = torch.pow(x, 3.0).mul_(0.044715).add_(x).mul_(SQRT_2_OVER_PI).tanh_().add_(1.0)
    return (0.5 * x).mul_(t)


ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "relu": F.relu,
    "gelu": F.gelu,
    "gelu_tanh": partial(F.gelu, approximate="tanh"),
    "gelu_new": gelu_new,
    "silu": F.silu,
    "tanh": F.tanh,
}


def clamped_swiglu(gate: Tensor, up: Tensor, *, alpha: float, limit: float) -> Tensor:
    """GPT-OSS's gated unit: g * sigmoid(alpha * g) * (clamp(up, -limit, limit) + 1), with
    g = min(gate, limit)."""
    gate = gate.clamp(max=limit)
    up = up.clamp(min=-limit, max=limit)
    return gate * torch.sigmoid(alpha * gate) * (up + 1)
