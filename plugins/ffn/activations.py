"""Activation functions by name, shared by the feed-forward and head components."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor

ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "relu": F.relu,
    "gelu": F.gelu,
    "gelu_tanh": partial(F.gelu, approximate="tanh"),
    "silu": F.silu,
    "tanh": F.tanh,
}


def clamped_swiglu(gate: Tensor, up: Tensor, *, alpha: float, limit: float) -> Tensor:
    """GPT-OSS's gated unit: g * sigmoid(alpha * g) * (clamp(up, -limit, limit) + 1), with
    g = min(gate, limit)."""
    gate = gate.clamp(max=limit)
    up = up.clamp(min=-limit, max=limit)
    return gate * torch.sigmoid(alpha * gate) * (up + 1)
