"""The tensors of a checkpoint by name, and the error of one that cannot be converted."""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Callable, Mapping
from typing import Any

from torch import Tensor


class ConversionError(ValueError):
    """A checkpoint that cannot be imported: unsupported config, missing or extra tensors."""


class TensorSource:
    """HF tensors by name; remembers what was taken so leftovers can be reported."""

    def __init__(
        self, tensors: Mapping[str, Tensor], where: str, on_take: Callable[[], Any] | None = None
    ) -> None:
        self.tensors = tensors
        self.where = where
        self.taken: set[str] = set()
        self.missing: list[str] = []
        self.on_take = on_take  # called once per tensor read (a progress bar's tick)

    def has(self, name: str) -> bool:
        return name in self.tensors

    def add(self, name: str, tensor: Tensor) -> None:
        """A tensor derived from checkpoint ones (stacked experts), readable like the rest."""
        if not isinstance(self.tensors, ChainMap):  # the checkpoint's mapping may be read-only
            self.tensors = ChainMap({}, self.tensors)
        self.tensors[name] = tensor

    def names(self) -> list[str]:
        """Every HF tensor name in the checkpoint."""
        return list(self.tensors)

    def take(self, *names: str) -> Tensor | None:
        """The first present of `names` (aliases, e.g. a tied head saved or not)."""
        for name in names:
            if name in self.tensors:
                if self.on_take is not None and name not in self.taken:
                    self.on_take()
                self.taken.add(name)
                return self.tensors[name]
        self.missing.append(names[0])
        return None

    def skip(self, prefix_or_name: str) -> None:
        """Mark tensors as known and deliberately unused (e.g. buffers saved by old versions)."""
        for name in self.tensors:
            if name == prefix_or_name or name.endswith(prefix_or_name):
                self.taken.add(name)

    def skip_exact(self, name: str) -> None:
        """Mark one tensor, if present, as known and deliberately unused."""
        if name in self.tensors:
            self.taken.add(name)

    def check_complete(self) -> None:
        problems = []
        if self.missing:
            problems.append(f"missing tensors: {', '.join(self.missing[:10])}")
        extra = sorted(set(self.tensors) - self.taken)
        if extra:
            problems.append(f"unexpected tensors: {', '.join(extra[:10])}")
        if problems:
            raise ConversionError(f"{self.where}: " + " | ".join(problems))
