"""The `device=` and `dtype=` arguments of the public API, checked where they are given.

Each error names the argument and what it takes, before any work, instead of a torch error
from deep inside a build or a load ("Invalid device string: 'float16'").
"""

from __future__ import annotations

from typing import Any

import torch

# What a model's weights can be: the floating-point dtypes every layer runs in. Complex and
# integer dtypes are refused (nn.Module.to takes complex ones; the forward then fails).
MODEL_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
_NAMES = "float32, float16, bfloat16 or float64"


def as_dtype(dtype: Any, arg: str = "dtype") -> torch.dtype | None:
    """A model dtype from a torch.dtype or its name ('float16', 'torch.bfloat16', 'half');
    None stays None."""
    if dtype is None:
        return None
    if isinstance(dtype, str):
        name = dtype.removeprefix("torch.")
        found = getattr(torch, name, None) if name.isidentifier() else None
        if not isinstance(found, torch.dtype):
            raise ValueError(f"{arg}={dtype!r} is not a torch dtype name; expected {_NAMES}")
        dtype = found
    if not isinstance(dtype, torch.dtype):
        raise ValueError(
            f"{arg} must be a torch.dtype or its name ({_NAMES}), got {type(dtype).__name__}"
        )
    if dtype not in MODEL_DTYPES:
        raise ValueError(
            f"{arg}={dtype} is not a floating-point dtype model weights can have: expected {_NAMES}"
        )
    return dtype


def as_device(device: Any, arg: str = "device") -> torch.device | None:
    """A torch.device that exists here, from a device, its name ('cuda:1') or an index;
    None stays None."""
    if device is None:
        return None
    if not isinstance(device, (str, torch.device)) and not (
        isinstance(device, int) and not isinstance(device, bool)
    ):
        raise ValueError(
            f"{arg} must be a torch.device, its name or an index, got {type(device).__name__}"
        )
    try:
        found = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise ValueError(
            f"{arg}={device!r} is not a device: expected 'cpu', 'cuda', 'cuda:N', 'mps', "
            "'meta' or another torch device"
        ) from None
    if found.type in ("cpu", "meta"):
        return found
    if found.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise ValueError(f"{arg}={device!r}: no CUDA device is available here")
        if found.index is not None and found.index >= count:
            raise ValueError(f"{arg}={device!r}: this machine has CUDA devices 0..{count - 1}")
        return found
    try:  # mps, xpu, ...: an empty tensor is the one probe every backend answers
        torch.empty(0, device=found)
    except Exception:  # noqa: BLE001 - each missing backend fails with its own type
        raise ValueError(f"{arg}={device!r}: no {found.type} device is usable here") from None
    return found
