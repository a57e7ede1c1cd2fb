"""Optional GPU kernels of the recurrent mixers, chosen by name, with plain PyTorch as fallback.

A mixer kernel computes one operation of a recurrent mixer (its `op`: "causal_conv",
"gated_delta_rule", "ssd") with a library archzoo never requires (flash-linear-attention,
causal-conv1d, mamba-ssm: the `kernels` extra). It is declared where it is written,

    @mixer_kernel("fla_gated_delta_rule", op="gated_delta_rule", library="fla")
    def fla_gated_delta_rule(lib, q, k, v, log_decay, beta, state): ...

and registered through the plugin hook like an attention kernel. Nothing is imported when
archzoo is: `choose` imports a kernel's library the first time a call could use it. A mixer
layer runs the kernels its `mixer_impl` allows (`ZooModel.set_mixer_impl`): "auto" (the
default: any registered kernel for the op), "torch" (plain PyTorch only) or one kernel's
name (that kernel for its op, plain PyTorch for the others). A kernel serves a call only
when its library imports, the tensors are on its device (`on_kernel_device`, a hook the
tests replace), the call is not being traced by torch.compile and the kernel does not
refuse the call's facts (document ids, say); otherwise the mixer runs its plain-PyTorch
form and the reason goes to the debug log of `archzoo.parts.kernels`, never a different
result in silence.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import torch
from torch import Tensor

from .kernels import log

TORCH = "torch"  # mixer_impl: plain PyTorch everywhere
AUTO = "auto"  # mixer_impl: any registered kernel that serves the call

Refuses = Callable[..., str | None]


def _serves_all(**facts: Any) -> str | None:
    return None


@dataclass(frozen=True)
class MixerKernel:
    """A named kernel of one mixer operation; `run(lib, *args)` gets the imported library."""

    name: str
    op: str
    library: str
    run: Callable[..., Any]
    refuses: Refuses
    summary: str
    module: str
    device: str = "cuda"


def mixer_kernel(
    name: str, *, op: str, library: str, refuses: Refuses | None = None, device: str = "cuda"
) -> Callable[[Callable[..., Any]], MixerKernel]:
    """Declare the decorated function as mixer kernel `name` computing `op` with the
    importable module `library` (its docstring's first line is its summary); `refuses(**facts)`
    says why it cannot serve a call, or None."""
    if not isinstance(name, str) or not name.isidentifier() or name in (TORCH, AUTO):
        raise ValueError(f"mixer kernel name {name!r} is not an identifier (or is reserved)")

    def declare(run: Callable[..., Any]) -> MixerKernel:
        summary = (run.__doc__ or "").strip().splitlines()[0] if run.__doc__ else ""
        return MixerKernel(
            name, op, library, run, refuses or _serves_all, summary, run.__module__, device
        )

    return declare


def on_kernel_device(kernel: MixerKernel, t: Tensor) -> bool:
    """Whether `t` is on the device `kernel` runs on (the tests replace this hook)."""
    return t.device.type == kernel.device


@functools.cache
def load_library(name: str) -> tuple[ModuleType | None, str | None]:
    """(the imported module, None), or (None, why it cannot be imported); tried once."""
    try:
        return importlib.import_module(name), None
    except Exception as exc:  # noqa: BLE001 - a broken install is a reason, not a crash
        return None, f"{name} cannot be imported ({type(exc).__name__}: {exc})"


def choose(
    kernels: list[MixerKernel], op: str, impl: str, reference: Tensor, **facts: Any
) -> tuple[MixerKernel, ModuleType] | None:
    """The kernel (and its library) that computes `op` for this call under `impl`, or None
    for the plain-PyTorch form; each kernel passed over is logged with its reason."""
    if impl == TORCH or torch.compiler.is_compiling():
        return None  # traced: a library call would break the graph; PyTorch compiles
    for kernel in kernels:
        if kernel.op != op or impl not in (AUTO, kernel.name):
            continue
        why = None
        if not on_kernel_device(kernel, reference):
            why = f"tensors on {reference.device.type}, it runs on {kernel.device}"
        lib = None
        if why is None:
            lib, why = load_library(kernel.library)
        if why is None:
            why = kernel.refuses(**facts)
        if why is None:
            return kernel, lib
        log.debug("mixer kernel %r cannot serve this %s (%s): plain PyTorch", kernel.name, op, why)
    return None
