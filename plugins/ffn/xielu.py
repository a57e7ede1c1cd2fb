"""xIELU (Huang & Schlag, 2024, arXiv:2411.13010): a trainable activation, quadratic for
positive inputs and ELU-like for negative ones, with two learned scalars per layer.

    f(x) = a_p x^2 + beta x                              x > 0
    f(x) = a_n (expm1(min(x, eps)) - x) + beta x         x <= 0

where a_p = softplus(alpha_p) and a_n = beta + softplus(alpha_n) keep the curvatures
positive. `beta` and `eps` are constants, kept as buffers (checkpoints carry them).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def _inverse_softplus(y: float) -> float:
    return math.log(math.expm1(y))


class XIELU(nn.Module):
    """xIELU with learned alpha_p, alpha_n (shape (1,)) and constant beta, eps buffers."""

    def __init__(self, alpha_p: float = 0.8, alpha_n: float = 0.8, beta: float = 0.5) -> None:
        super().__init__()
        self.alpha_p = nn.Parameter(torch.tensor([_inverse_softplus(alpha_p)]))  # (1,)
        self.alpha_n = nn.Parameter(torch.tensor([_inverse_softplus(alpha_n - beta)]))  # (1,)
        self.register_buffer("beta", torch.tensor(beta))  # () constants, saved
        self.register_buffer("eps", torch.tensor(-1e-6))

    def forward(self, x: Tensor) -> Tensor:
        a_p = F.softplus(self.alpha_p)
        a_n = self.beta + F.softplus(self.alpha_n)
        negative = (torch.expm1(torch.minimum(x, self.eps)) - x) * a_n + self.beta * x
        return torch.where(x > 0, a_p * x * x + self.beta * x, negative)
