"""causal-conv1d's depthwise causal convolution (CUDA), for every mixer's short conv."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import torch
from torch import Tensor

from archzoo.parts.mixer_kernels import mixer_kernel


def refuses(*, docs: Tensor | None = None, width: int = 0, **facts: Any) -> str | None:
    if docs is not None:
        return "document ids (packed rows) cut the window"
    if not 2 <= width <= 4:
        return f"kernel width {width} (causal-conv1d takes 2 to 4)"
    return None


@mixer_kernel("causal_conv1d", op="causal_conv", library="causal_conv1d", refuses=refuses)
def causal_conv1d(
    lib: ModuleType, x: Tensor, weight: Tensor, bias: Tensor | None, window: Tensor | None
) -> tuple[Tensor, Tensor]:
    """causal-conv1d's causal_conv1d_fn over the window then the new tokens"""
    B, T, C = x.shape
    K = weight.shape[-1]
    if window is None:
        window = x.new_zeros(B, C, K - 1)
    xp = torch.cat([window.to(x.dtype), x.transpose(1, 2)], dim=2)  # (B, C, K-1+T)
    y = lib.causal_conv1d_fn(xp, weight[:, 0], bias)[:, :, K - 1 :]  # (B, C, T)
    return y.transpose(1, 2), xp[:, :, xp.shape[2] - (K - 1) :]
