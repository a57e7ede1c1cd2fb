"""Checks of a forward's inputs: shapes, dtypes and value ranges, each error naming its argument.

Shape and dtype checks read no tensor values. Value checks (ids inside the vocabulary,
segment and position ids in range, masks made of 0 and 1) are gathered into one tensor
and read once, so a forward on an accelerator waits on the device at most once; they are
skipped while torch.compile traces, for meta tensors, and inside `trusted_inputs()`
(generation steps feed tokens and positions it made itself).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import Tensor

INTEGER_DTYPES = (torch.int64, torch.int32)
_trusted: ContextVar[bool] = ContextVar("archzoo_inputs_trusted", default=False)


@contextlib.contextmanager
def trusted_inputs() -> Iterator[None]:
    """Skip the value checks (not the shape checks) of the forwards run inside."""
    token = _trusted.set(True)
    try:
        yield
    finally:
        _trusted.reset(token)


def values_trusted() -> bool:
    """Whether value checks are skipped here (inside `trusted_inputs()`)."""
    return _trusted.get()


@dataclass
class RangeCheck:
    """Values of `tensor` (argument `name`) must lie in [lo, hi) (hi None: no upper bound)."""

    name: str
    tensor: Tensor
    lo: int
    hi: int | None
    what: str = "ids"

    def bad(self) -> Tensor:
        """0-d bool: some value is out of range."""
        t = self.tensor
        out = t < self.lo
        if self.hi is not None:
            out = out | (t >= self.hi)
        return out.any()

    def message(self) -> str:
        lo, hi = self.tensor.min().item(), self.tensor.max().item()
        bound = f"[{self.lo}, {self.hi})" if self.hi is not None else f">= {self.lo}"
        return f"{self.name} holds {self.what} outside {bound}: min {lo}, max {hi}"


@dataclass
class KeepMaskCheck:
    """A padding mask must hold only 0 and 1 (Hugging Face's keep mask), never additive terms."""

    name: str
    tensor: Tensor

    def bad(self) -> Tensor:
        t = self.tensor
        return ((t != 0) & (t != 1)).any()

    def message(self) -> str:
        t = self.tensor
        odd = t[(t != 0) & (t != 1)]
        return (
            f"{self.name} must hold only 1 (attend) and 0 (padding), Hugging Face's "
            f"convention; got {odd[0].item()} (min {t.min().item()}, max {t.max().item()}). "
            f"An additive mask (0 to attend, -inf or a large negative number to skip) must "
            f"be converted first: pass `({self.name} == 0)`"
        )


class SegmentTable(NamedTuple):
    """An id input that indexes a small embedding table: its name, the table, its ids.

    A NamedTuple rather than a dataclass: torch.compile traces the input checks, and
    dynamo treats a tuple constant as a constant (it refuses a frozen dataclass one)."""

    input: str
    what: str
    ids: str


SEGMENTS = SegmentTable(
    "token_type_ids", "segment (token type) embeddings (type_vocab_size 0)", "segment ids"
)
LANGS = SegmentTable("langs", "language embeddings (n_langs 0)", "language ids")


class InputChecks:
    """Collects the checks of one forward's inputs; `run` raises the first that fails."""

    def __init__(self, device: torch.device | None = None) -> None:
        self.values: list[RangeCheck | KeepMaskCheck] = []
        self.device = device  # of the weights the ids index; None: not checked

    def ids(self, ids: Tensor | None, name: str, vocab: int | None) -> tuple[int, int]:
        """Token ids: an integer (batch, seq) tensor, both non-empty; returns (B, T)."""
        if ids is None:
            raise ValueError(f"{name} is required")
        if not isinstance(ids, Tensor) or ids.dim() != 2 or ids.dtype not in INTEGER_DTYPES:
            raise ValueError(
                f"{name} must be an integer tensor of shape (batch, seq), got {describe(ids)}"
            )
        self.placed(ids, name)
        if ids.shape[0] == 0:
            raise ValueError(f"{name} has batch size 0 (shape {tuple(ids.shape)}): nothing to run")
        if ids.shape[1] == 0:
            raise ValueError(f"{name} is empty (sequence length 0)")
        if vocab is not None:
            self.values.append(RangeCheck(name, ids, 0, vocab))
        return ids.shape[0], ids.shape[1]

    def placed(self, t: Tensor, name: str) -> None:
        """A dense tensor with values, on the weights' device (when `device` was given)."""
        if t.layout != torch.strided:  # torch's sparse kernels lack the ops a forward uses
            layout = str(t.layout).removeprefix("torch.")
            raise ValueError(
                f"{name} must be a dense tensor, got a {layout} one: pass {name}.to_dense()"
            )
        if self.device is not None and t.device != self.device:
            if t.device.type == "meta":
                raise ValueError(
                    f"{name} is a meta tensor (shape only, no values) but the model's weights "
                    f"are on {self.device}: pass a tensor with values"
                )
            raise ValueError(
                f"{name} is on {t.device} but the model's weights are on {self.device}: "
                f"move it with {name}.to({str(self.device)!r})"
            )

    def keep_mask(self, mask: Tensor | None, name: str, batch: int, of: str) -> None:
        """A (batch, keys) padding mask of 0/1 (bool, integer or float) for the rows of `of`."""
        if mask is None:
            return
        if not isinstance(mask, Tensor) or mask.dim() != 2 or mask.is_complex():
            raise ValueError(
                f"{name} must be a 0/1 tensor of shape (batch, seq), got {describe(mask)}"
            )
        self.placed(mask, name)
        if mask.shape[0] != batch:
            raise ValueError(
                f"{name} has batch size {mask.shape[0]} but {of} has {batch} "
                f"({name} shape {tuple(mask.shape)})"
            )
        if mask.dtype != torch.bool:
            self.values.append(KeepMaskCheck(name, mask))

    def segments(
        self,
        types: Tensor | None,
        ids_shape: tuple[int, int],
        n_types: int | None,
        table: SegmentTable = SEGMENTS,
    ) -> None:
        """token_type_ids (or `table`'s input): the shape of input_ids, ids below the count."""
        if types is None:
            return
        name = table.input
        if n_types == 0:
            raise ValueError(
                f"{name} were given, but this model's embedding has no {table.what}; leave them out"
            )
        if not isinstance(types, Tensor) or types.dtype not in INTEGER_DTYPES:
            raise ValueError(f"{name} must be an integer tensor, got {describe(types)}")
        self.placed(types, name)
        if tuple(types.shape) != tuple(ids_shape):
            raise ValueError(
                f"{name} must have the shape of input_ids {tuple(ids_shape)}, "
                f"got {tuple(types.shape)}"
            )
        if n_types is not None:
            self.values.append(RangeCheck(name, types, 0, n_types, table.ids))

    def positions(
        self, pos: Tensor | None, ids_shape: tuple[int, int], limit: int | None, name: str
    ) -> None:
        """position_ids: (batch or 1, seq) integers, >= 0 and below the position's limit."""
        if pos is None:
            return
        B, T = ids_shape
        if (
            not isinstance(pos, Tensor)
            or pos.dtype not in INTEGER_DTYPES
            or pos.dim() != 2
            or pos.shape[0] not in (1, B)
            or pos.shape[1] != T
        ):
            raise ValueError(
                f"{name} must be an integer tensor of shape ({B}, {T}) or (1, {T}), "
                f"got {describe(pos)}"
            )
        self.placed(pos, name)
        self.values.append(RangeCheck(name, pos, 0, limit, "positions"))

    def labels(self, labels: Tensor | None, batch: int, of: str) -> None:
        """labels: one row per row of `of`."""
        if labels is None:
            return
        if not isinstance(labels, Tensor) or labels.dim() == 0:
            raise ValueError(
                f"labels must be a tensor with a batch dimension, got {describe(labels)}"
            )
        if labels.shape[0] != batch:
            raise ValueError(
                f"labels has batch size {labels.shape[0]} but {of} has {batch} "
                f"(labels shape {tuple(labels.shape)})"
            )

    def run(self) -> None:
        """Read every value check at once (one device sync); raise the first that fails."""
        checks = self.values
        if not checks or torch.compiler.is_compiling() or values_trusted():
            return
        if any(c.tensor.device.type == "meta" for c in checks):
            return
        device = checks[0].tensor.device
        flags = torch.stack([c.bad().to(device) for c in checks])
        if not bool(flags.any()):
            return
        for check, bad in zip(checks, flags.tolist(), strict=True):
            if bad:
                raise ValueError(check.message())


def check_label_values(labels: Tensor, logits: Tensor) -> None:
    """Integer labels against token-level logits (B, T, C): shape (B, T), each -100 or a
    class below C. CPU tensors only: on a device the range check would wait for it."""
    if labels.is_floating_point():
        return
    rows = tuple(logits.shape[:-1])
    if tuple(labels.shape) != rows:
        raise ValueError(
            f"labels of shape {tuple(labels.shape)} do not fit logits of shape "
            f"{tuple(logits.shape)}: labels of shape {rows} are expected"
        )
    if labels.device.type != "cpu" or torch.compiler.is_compiling() or _trusted.get():
        return
    n = logits.shape[-1]
    bad = (labels != -100) & ((labels < 0) | (labels >= n))
    if bool(bad.any()):
        odd = labels[bad]
        raise ValueError(
            f"labels hold class ids outside [0, {n}) other than the ignored -100: "
            f"{odd[0].item()} (min {odd.min().item()}, max {odd.max().item()})"
        )


def describe(x: object) -> str:
    """A tensor's dtype and shape, or another object's type."""
    if isinstance(x, Tensor):
        return f"{x.dtype} of shape {tuple(x.shape)}"
    return type(x).__name__
