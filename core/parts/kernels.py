"""Attention kernels chosen by name: the contract, and the dispatch that honours refusals.

A kernel is a function (q, k, v, mask, scoring) -> (output, probabilities or None): q (B, H,
Tq, hd), k and v (B, Hkv, Tk, hd), an `archzoo.parts.masks.AttentionMask` (its factors, a sparse
pattern among them) and the `Scoring` terms. It is declared where it is written,

    @attention_kernel("sdpa", refuses=why_not)
    def sdpa(q, k, v, mask, scoring): ...

and registered through the plugin hook like a component (the registrar finds it in the
module that defines it). `refuses(q, k, mask, scoring)` says why the kernel cannot compute
this call exactly (a term it has no slot for, a device it does not run on), or None. The
model's layers name their kernel (`set_attention_impl`); `dispatch` runs it, or, when it
refuses, the `auto` kernel, which picks one that serves the call. The reason goes to the
debug log of `archzoo.parts.kernels`, never a different result in silence.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from .masks import AttentionMask

log = logging.getLogger(__name__)

FALLBACK = "auto"  # the kernel that serves any call a chosen kernel refuses


@dataclass(frozen=True)
class Scoring:
    """The terms between q k^T and the weighted sum of values.

    scale: the score scale. bias: an additive score term (B or 1, H or 1, Tq, Tk) already on
    the scaled scale (positions: ALiBi, T5, DeBERTa). softcap: scores become cap * tanh(s /
    cap) before the softmax (Gemma 2). sinks: (H,) a learned logit per head in each softmax
    denominator (GPT-OSS). dropout: on the probabilities (training only). want_probs: the
    caller asks for the probabilities (output_attentions). values: a position's term on the
    values (Shaw's a^V), probabilities after dropout (B, H, Tq, Tk) -> (B, H, Tq, hd) added
    to the output: only a kernel that forms the probabilities serves it. broadcast_kv: one
    key/value head reaches SDPA as it is, broadcast over the query heads, not through its
    grouped-query path (another kernel inside SDPA, other bits: Falcon's multi-query call).
    global_qkv: separate q, k, v for a sparse pattern's global query rows (Longformer), an
    object with `qkv()` and `rows_attention()`.
    """

    scale: float | None = None  # None: 1 / sqrt(head size), the kernel's own default
    bias: Tensor | None = None
    softcap: float | None = None
    sinks: Tensor | None = None
    dropout: float = 0.0
    want_probs: bool = False
    values: Callable[[Tensor], Tensor] | None = None
    broadcast_kv: bool = False
    global_qkv: Any = None

    @property
    def needs_probs(self) -> bool:
        """Whether the output itself needs the probabilities (a value term)."""
        return self.values is not None

    def scale_of(self, q: Tensor) -> float:
        """The score scale as a number: `scale`, or 1 / sqrt(q's head size)."""
        return self.scale if self.scale is not None else q.shape[-1] ** -0.5


Run = Callable[[Tensor, Tensor, Tensor, AttentionMask, Scoring], tuple[Tensor, Tensor | None]]
Refuses = Callable[[Tensor, Tensor, AttentionMask, Scoring], str | None]


@dataclass(frozen=True)
class AttentionKernel:
    """A named kernel: `run` computes, `refuses` says when it cannot (None: it can)."""

    name: str
    run: Run
    refuses: Refuses
    summary: str
    module: str

    def __call__(
        self, q: Tensor, k: Tensor, v: Tensor, mask: AttentionMask, scoring: Scoring
    ) -> tuple[Tensor, Tensor | None]:
        return self.run(q, k, v, mask, scoring)


def _serves_all(q: Tensor, k: Tensor, mask: AttentionMask, scoring: Scoring) -> str | None:
    return None


def attention_kernel(
    name: str, *, refuses: Refuses | None = None
) -> Callable[[Run], AttentionKernel]:
    """Declare the decorated function as the attention kernel `name` (its docstring's first
    line is its summary); the registrar registers it from the module that defines it."""
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"attention kernel name {name!r} is not an identifier")

    def declare(run: Run) -> AttentionKernel:
        summary = (run.__doc__ or "").strip().splitlines()[0] if run.__doc__ else ""
        return AttentionKernel(name, run, refuses or _serves_all, summary, run.__module__)

    return declare


def dispatch(
    kernel: AttentionKernel,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: AttentionMask,
    scoring: Scoring,
    fallback: Callable[[], AttentionKernel],
) -> tuple[Tensor, Tensor | None]:
    """Run `kernel`, or `fallback()` (the `auto` kernel) when it refuses this call."""
    why = kernel.refuses(q, k, mask, scoring)
    if why is not None:
        if not torch.compiler.is_compiling():
            log.debug("attention kernel %r cannot serve this call (%s): auto", kernel.name, why)
        kernel = fallback()
    out, probs = kernel.run(q, k, v, mask, scoring)
    if scoring.needs_probs and probs is None:
        raise RuntimeError(f"attention kernel {kernel.name!r} returned no probabilities")
    return out, probs
