"""Lazy safetensors reading: each tensor read from disk into its own memory when asked for.

A memory map of the whole file keeps every page it has touched resident for as long as any
tensor of the file lives, so a converter that fuses or permutes tensors would hold each
source twice. Reading tensor by tensor instead lets a transformed source be freed as soon
as its result exists: importing costs the model's size plus one layer, not twice it.
"""

from __future__ import annotations

import json
import math
import struct
import sys
import weakref
from collections.abc import Iterator, Mapping
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from torch import Tensor

from .safe_write import DTYPE_NAMES, _raw

DTYPES = {name: dtype for dtype, name in DTYPE_NAMES.items()}


class LazyTensors(Mapping[str, Tensor]):
    """Tensors of safetensors files by name; headers are validated up front, data read on use."""

    def __init__(self, files: list[Path], error: type[Exception] = ValueError) -> None:
        self.error = error
        self.index: dict[str, tuple[Path, torch.dtype, list[int], int, int]] = {}
        self.live: weakref.WeakValueDictionary[str, Tensor] = weakref.WeakValueDictionary()
        for f in files:
            try:
                with safe_open(str(f), framework="pt") as handle:  # validates the header
                    names = list(handle.keys())
                with open(f, "rb") as fh:
                    (size,) = struct.unpack("<Q", fh.read(8))
                    header = json.loads(fh.read(size))
            except (SafetensorError, OSError, ValueError) as exc:
                raise error(f"{f}: cannot read safetensors ({exc})") from None
            for name in names:
                entry = header[name]
                if entry["dtype"] not in DTYPES:
                    raise error(f"{f}: tensor {name!r} has unsupported dtype {entry['dtype']}")
                start, end = entry["data_offsets"]
                self.index[name] = (
                    f,
                    DTYPES[entry["dtype"]],
                    entry["shape"],
                    8 + size + start,
                    end - start,
                )

    def value_count(self) -> int:
        """How many numbers the files hold in all (from the headers; nothing read)."""
        return sum(math.prod(shape) for _, _, shape, _, _ in self.index.values())

    def __getitem__(self, name: str) -> Tensor:
        tensor = self.live.get(name)
        if tensor is not None:  # taken twice (tied names): one copy
            return tensor
        path, dtype, shape, offset, nbytes = self.index[name]
        if sys.byteorder != "little":  # the file is little-endian: let safetensors convert
            with safe_open(str(path), framework="pt") as handle:
                tensor = handle.get_tensor(name).clone()
        else:
            tensor = torch.empty(shape, dtype=dtype)
            try:
                with open(path, "rb") as fh:
                    fh.seek(offset)
                    got = fh.readinto(_raw(tensor)) if nbytes else 0
            except OSError as exc:
                raise self.error(f"{path}: cannot read tensor {name!r} ({exc})") from None
            if got != nbytes:
                raise self.error(f"{path}: tensor {name!r} is truncated ({got} of {nbytes} bytes)")
        self.live[name] = tensor
        return tensor

    def __iter__(self) -> Iterator[str]:
        return iter(self.index)

    def __len__(self) -> int:
        return len(self.index)

    def __contains__(self, name: object) -> bool:
        return name in self.index
