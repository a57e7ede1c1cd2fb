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

    A 16-bit float has 65,536 values, so without a graph to keep (inference) the eight ops
    are replaced by one lookup in a table of the same ops applied once to every value: the
    same bits, 2-3x faster (`_ops_table`).
    """
    return _tanh_gelu_by_ops(x, _gelu_new_ops)


def gelu_bloom(x: Tensor) -> Tensor:
    """GELU's tanh approximation in BLOOM's op order (Megatron-DeepSpeed's):
    x * 0.5 * (1 + tanh(0.79788456 * x * (1 + 0.044715 * x * x))), one op at a time.

    In 16-bit floats these are the bits of transformers' `bloom_gelu_forward` (gelu_tanh
    rounds once, gelu_new in another order), read from a table in inference as `gelu_new`
    is; in fp32 and fp64, F.gelu's tanh form.
    """
    return _tanh_gelu_by_ops(x, _gelu_bloom_ops)


def _tanh_gelu_by_ops(x: Tensor, ops: Callable[[Tensor], Tensor]) -> Tensor:
    """`ops` in 16-bit floats (a table lookup without a graph to keep), F.gelu's tanh form
    in wider floats."""
    if x.element_size() >= 4:
        return F.gelu(x, approximate="tanh")
    if (torch.is_grad_enabled() and x.requires_grad) or not _lookup_ok(x):
        return ops(x)
    table = _ops_table(ops, x.dtype, x.device)  # (65536,), indexed by the 16 bits
    # int16 bits: -32768..32767; `take` wraps negative indices to the table's upper half
    return torch.take(table, x.view(torch.int16).long())


def _gelu_new_ops(x: Tensor) -> Tensor:
    return 0.5 * x * (1.0 + torch.tanh(SQRT_2_OVER_PI * (x + 0.044715 * torch.pow(x, 3.0))))


def _gelu_bloom_ops(x: Tensor) -> Tensor:
    return x * 0.5 * (1.0 + torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x)))


def _lookup_ok(x: Tensor) -> bool:
    """A table lookup gives the ops' bits: not while tracing (the compiler fuses the ops)
    and not on the meta device (no values)."""
    return x.dtype in (torch.bfloat16, torch.float16) and not (
        x.is_meta or torch.compiler.is_compiling()
    )


_TABLES: dict[tuple[Callable[[Tensor], Tensor], torch.dtype, torch.device], Tensor] = {}


def _ops_table(ops: Callable[[Tensor], Tensor], dtype: torch.dtype, device: torch.device) -> Tensor:
    """`ops` of every `dtype` value, made once per function, dtype and device by that
    device's own kernels: entry i holds the value whose 16 bits read i as an unsigned integer."""
    key = (ops, dtype, device)
    if key not in _TABLES:
        with torch.inference_mode(False), torch.no_grad():  # a plain tensor, usable anywhere
            bits = torch.arange(-32768, 32768, dtype=torch.int32, device=device)
            values = bits.to(torch.int16).view(dtype)  # every bit pattern, -32768 first
            _TABLES[key] = ops(values).roll(32768)  # pattern 0 first
    return _TABLES[key]


def relu_squared(x: Tensor) -> Tensor:
    """The square of ReLU, max(0, x)^2 (So et al., 2021, Primer)."""
    return torch.square(F.relu(x))


def quick_gelu(x: Tensor) -> Tensor:
    """GELU's sigmoid approximation, x * sigmoid(1.702 x) (Hendrycks & Gimpel, 2016), as
    OpenAI's CLIP was trained with it."""
    return x * torch.sigmoid(1.702 * x)


ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "relu": F.relu,
    "relu_squared": relu_squared,
    "gelu": F.gelu,
    "gelu_tanh": partial(F.gelu, approximate="tanh"),
    "gelu_new": gelu_new,
    "gelu_bloom": gelu_bloom,
    "quick_gelu": quick_gelu,
    "silu": F.silu,
    "tanh": F.tanh,
}


def clamped_swiglu(gate: Tensor, up: Tensor, *, alpha: float, limit: float) -> Tensor:
    """GPT-OSS's gated unit: g * sigmoid(alpha * g) * (clamp(up, -limit, limit) + 1), with
    g = min(gate, limit)."""
    gate = gate.clamp(max=limit)
    up = up.clamp(min=-limit, max=limit)
    return gate * torch.sigmoid(alpha * gate) * (up + 1)
