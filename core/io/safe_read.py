"""Safetensors reading through one handle, each tensor into its own memory (never a memory map).

A memory map of the whole file keeps every page it has touched resident for as long as any
tensor of the file lives, so a converter that fuses or permutes tensors would hold each
source twice; it also pins a file that a later save replaces. Reading tensor by tensor instead
lets a transformed source be freed as soon as its result exists: importing costs the model's
size plus one layer, not twice it.

`SafetensorsFile` opens a file once: the header and every tensor come through that handle, so
a save that replaces the file meanwhile (an atomic rename) is never half seen.
"""

from __future__ import annotations

import json
import math
import os
import stat
import sys
import weakref
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import TracebackType

import torch
from torch import Tensor

from .safe_write import DTYPE_NAMES, _raw

DTYPES = {name: dtype for dtype, name in DTYPE_NAMES.items()}
MAX_HEADER_BYTES = 100_000_000  # the safetensors format's own limit
READ_CHUNK = 1 << 30  # one read() call returns at most about 2 GiB on Linux


class UnreadableSafetensors(ValueError):
    """The file is not a whole, valid safetensors file (the message says why)."""


class SafetensorsFile:
    """One open safetensors file: the header checked as the format requires, tensors read on
    request through the same handle into fresh memory."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        try:  # O_NONBLOCK: a FIFO must not block the open; it is refused just below
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            raise UnreadableSafetensors(exc.strerror or str(exc)) from None
        self.file = os.fdopen(fd, "rb", buffering=0)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise UnreadableSafetensors("not a regular file")
            self.size = info.st_size
            self.metadata, self.entries = self._header()
        except BaseException:
            self.file.close()
            raise

    def __enter__(self) -> SafetensorsFile:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self.file.close()

    def _header(self) -> tuple[dict[str, str], dict[str, tuple[torch.dtype, list[int], int, int]]]:
        """Metadata, and per tensor (dtype, shape, absolute offset, byte count), all checked:
        known dtypes, sizes that match the shapes, and data that tiles the rest of the file."""
        if self.size < 8:
            raise UnreadableSafetensors(f"{self.size} bytes, shorter than the 8-byte header size")
        n = int.from_bytes(self._read_at(0, 8), "little")
        if n > MAX_HEADER_BYTES or 8 + n > self.size:
            raise UnreadableSafetensors(
                f"header of {n} bytes does not fit (file of {self.size} bytes)"
            )
        try:
            header = json.loads(self._read_at(8, n).decode("utf-8"), object_pairs_hook=_no_dups)
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError, ValueError) as exc:
            raise UnreadableSafetensors(f"header is not valid JSON ({exc})") from None
        if not isinstance(header, dict):
            raise UnreadableSafetensors("header is not a JSON object")
        metadata = header.pop("__metadata__", None) or {}
        if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
            raise UnreadableSafetensors("__metadata__ must map names to strings")
        entries = {name: _entry(name, value) for name, value in header.items()}
        end = 0  # the tensors' bytes must tile the data section: no gap, overlap or tail
        for name, (_, _, start, stop) in sorted(entries.items(), key=lambda e: e[1][2:]):
            if start != end:
                raise UnreadableSafetensors(f"tensor {name!r} starts at byte {start}, not {end}")
            end = stop
        if 8 + n + end != self.size:
            raise UnreadableSafetensors(
                f"the header describes {8 + n + end} bytes but the file has {self.size}"
            )
        base = 8 + n
        return metadata, {
            name: (dtype, shape, base + start, stop - start)
            for name, (dtype, shape, start, stop) in entries.items()
        }

    def _read_at(self, offset: int, nbytes: int) -> bytes:
        buffer = bytearray(nbytes)
        self._fill(memoryview(buffer), offset)
        return bytes(buffer)

    def _fill(self, view: memoryview, offset: int) -> None:
        """Fill `view` from the file at `offset`; a file that ends early is a clear error."""
        self.file.seek(offset)
        done = 0
        while done < len(view):
            got = self.file.readinto(view[done : done + READ_CHUNK])
            if not got:
                raise UnreadableSafetensors(
                    f"the file ends at byte {offset + done}, before byte {offset + len(view)}"
                )
            done += got

    def keys(self) -> list[str]:
        return list(self.entries)

    def read(self, name: str) -> Tensor:
        """Tensor `name` in fresh memory (little-endian on disk; swapped on other machines)."""
        dtype, shape, offset, nbytes = self.entries[name]
        tensor = torch.empty(shape, dtype=dtype)
        if nbytes:
            self._fill(_raw(tensor), offset)
        return native_order(tensor)

    def read_all(self) -> dict[str, Tensor]:
        return {name: self.read(name) for name in self.entries}


def native_order(tensor: Tensor) -> Tensor:
    """A tensor read as stored (little-endian), in this machine's byte order."""
    if sys.byteorder == "little" or tensor.element_size() == 1:
        return tensor
    size, shape = tensor.element_size(), tensor.shape
    swapped = tensor.view(torch.uint8).reshape(-1, size).flip(1).contiguous()  # (N, size)
    return swapped.view(tensor.dtype).reshape(shape)


def _no_dups(pairs: list[tuple[str, object]]) -> dict[str, object]:
    """A JSON object whose keys are unique (a repeated tensor name must not silently win)."""
    out: dict[str, object] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"{key!r} appears twice")
        out[key] = value
    return out


def _entry(name: str, value: object) -> tuple[torch.dtype, list[int], int, int]:
    """(dtype, shape, start, end) of one header entry, checked."""
    if not isinstance(value, dict):
        raise UnreadableSafetensors(f"tensor {name!r}: expected an object")
    dtype, shape, offsets = value.get("dtype"), value.get("shape"), value.get("data_offsets")
    if dtype not in DTYPES:
        raise UnreadableSafetensors(f"tensor {name!r} has unsupported dtype {dtype!r}")
    if not isinstance(shape, list) or not all(_count(d) for d in shape):
        raise UnreadableSafetensors(f"tensor {name!r}: shape {shape!r} is not a list of sizes")
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(_count(o) for o in offsets)
        or offsets[0] > offsets[1]
    ):
        raise UnreadableSafetensors(f"tensor {name!r}: bad data_offsets {offsets!r}")
    want = math.prod(shape) * DTYPES[dtype].itemsize
    if offsets[1] - offsets[0] != want:
        raise UnreadableSafetensors(
            f"tensor {name!r} of shape {shape} needs {want} bytes, its offsets span "
            f"{offsets[1] - offsets[0]}"
        )
    return DTYPES[dtype], shape, offsets[0], offsets[1]


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


class LazyTensors(Mapping[str, Tensor]):
    """Tensors of safetensors files by name; headers are validated up front, data read on use.

    Each file is opened once, here, and its tensors are read through that handle, so a file
    replaced meanwhile is never half seen; `close` (or leaving a `with` block) closes them.
    A tensor name found in two files is an error naming both: no file silently wins."""

    def __init__(self, files: list[Path], error: type[Exception] = ValueError) -> None:
        self.error = error
        self.index: dict[str, tuple[Path, torch.dtype, list[int], int, int]] = {}
        self.live: weakref.WeakValueDictionary[str, Tensor] = weakref.WeakValueDictionary()
        self.handles: dict[Path, SafetensorsFile] = {}
        try:
            for f in files:
                self._add(f)
        except BaseException:
            self.close()
            raise

    def _add(self, f: Path) -> None:
        try:
            handle = self.handles[f] = SafetensorsFile(f)
        except UnreadableSafetensors as exc:
            raise self.error(f"{f}: cannot read safetensors ({exc})") from None
        for name, (dtype, shape, offset, nbytes) in handle.entries.items():
            if name in self.index:
                raise self.error(
                    f"{f}: tensor {name!r} is also in {self.index[name][0].name}; "
                    "a tensor must be stored in one shard only"
                )
            self.index[name] = (f, dtype, shape, offset, nbytes)

    def close(self) -> None:
        for handle in self.handles.values():
            handle.close()

    def __enter__(self) -> LazyTensors:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def value_count(self) -> int:
        """How many numbers the files hold in all (from the headers; nothing read)."""
        return sum(math.prod(shape) for _, _, shape, _, _ in self.index.values())

    def __getitem__(self, name: str) -> Tensor:
        tensor = self.live.get(name)
        if tensor is not None:  # taken twice (tied names): one copy
            return tensor
        path = self.index[name][0]
        try:
            tensor = self.handles[path].read(name)
        except (UnreadableSafetensors, OSError) as exc:
            raise self.error(f"{path}: cannot read tensor {name!r} ({exc})") from None
        self.live[name] = tensor
        return tensor

    def __iter__(self) -> Iterator[str]:
        return iter(self.index)

    def __len__(self) -> int:
        return len(self.index)

    def __contains__(self, name: object) -> bool:
        return name in self.index
