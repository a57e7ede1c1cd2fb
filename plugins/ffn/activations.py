"""Activation functions by name, shared by the feed-forward and head components."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch.nn.functional as F
from torch import Tensor

ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "relu": F.relu,
    "gelu": F.gelu,
    "gelu_tanh": partial(F.gelu, approximate="tanh"),
    "silu": F.silu,
    "tanh": F.tanh,
}
