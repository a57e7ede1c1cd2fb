"""Token files of a tokenised corpus, built in temp files and checked before each reuse.

A description (tokens.json, pairs.json) is written after its files and records, per file, the
item count, byte size and SHA-256. A cache whose description is damaged or whose files fail
the check (truncated, garbled, missing) is not reused: the corpus is tokenised again. Files
are written to temp names unique to their writer and renamed into place; a build that fails
removes its temps.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import os
import stat
from pathlib import Path
from types import TracebackType
from typing import Any

import torch
from torch import Tensor

from ..io.safe_write import create_temp

MAX_DESCRIPTION_BYTES = 64 << 20  # a fingerprint lists the source files: far smaller
HASH_CHUNK = 1 << 20


def tensor_bytes(t: Tensor) -> bytes:
    """The raw bytes of a CPU tensor (one memcpy; no NumPy needed)."""
    t = t.contiguous()
    return ctypes.string_at(t.data_ptr(), t.numel() * t.element_size())


class TokenWriter:
    """Appends token ids to a binary file of a fixed integer dtype, counting and hashing them."""

    def __init__(self, fd: int, tmp: Path, dtype: torch.dtype) -> None:
        self.f = os.fdopen(fd, "wb")
        self.tmp = tmp
        self.dtype = dtype
        self.count = 0
        self.sha = hashlib.sha256()
        self.bytes = 0

    def write(self, ids: Tensor) -> None:
        if ids.numel():
            data = tensor_bytes(ids.to(self.dtype))
            self.f.write(data)
            self.sha.update(data)
            self.count += ids.numel()
            self.bytes += len(data)

    def close(self) -> None:
        self.f.close()

    def entry(self) -> dict[str, Any]:
        return {"count": self.count, "bytes": self.bytes, "sha256": self.sha.hexdigest()}


class CacheBuild:
    """Token files written to temps in `cache`; `commit` renames them into place and writes
    their description; leaving the block without a commit removes the temps."""

    def __init__(self, cache: Path) -> None:
        self.cache = cache
        self.writers: dict[str, TokenWriter] = {}

    def writer(self, name: str, dtype: torch.dtype) -> TokenWriter:
        fd, tmp = create_temp(self.cache / name)
        self.writers[name] = TokenWriter(fd, tmp, dtype)
        return self.writers[name]

    def commit(self, description: str, extra: dict[str, Any]) -> dict[str, Any]:
        """Rename the files into place, then write the description naming them; returns it."""
        for name, w in self.writers.items():
            w.close()
            try:
                os.replace(w.tmp, self.cache / name)
            except OSError as exc:
                reason = exc.strerror or str(exc)
                path = self.cache / name
                raise ValueError(f"cannot write the token cache {path}: {reason}") from None
        meta = {**extra, "files": {name: w.entry() for name, w in self.writers.items()}}
        self.writers = {}
        write_json(self.cache / description, meta)
        return meta

    def __enter__(self) -> CacheBuild:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for w in self.writers.values():
            w.close()
            w.tmp.unlink(missing_ok=True)


def cached(path: Path, fingerprint: dict, dtypes: dict[str, torch.dtype]) -> dict | None:
    """The description at `path` if it is for `fingerprint` and every file in `dtypes` passes
    its size and hash check; None (tokenise again) otherwise."""
    try:
        if not stat.S_ISREG(path.stat().st_mode) or path.stat().st_size > MAX_DESCRIPTION_BYTES:
            return None
        meta = json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return None
    if not isinstance(meta, dict) or meta.get("fingerprint") != fingerprint:
        return None
    files = meta.get("files")
    if not isinstance(files, dict) or set(files) != set(dtypes):
        return None
    for name, dtype in dtypes.items():
        if not _intact(path.parent / name, files[name], dtype):
            return None
    return meta


def _intact(path: Path, entry: object, dtype: torch.dtype) -> bool:
    """The file holds `count` items of `dtype`, in `bytes` bytes, with the recorded SHA-256."""
    if not isinstance(entry, dict):
        return False
    count, size, digest = entry.get("count"), entry.get("bytes"), entry.get("sha256")
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        return False
    if size != count * dtype.itemsize or not isinstance(digest, str):
        return False
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode) or info.st_size != size:
            return False
        sha = hashlib.sha256()
        with open(path, "rb") as f:
            while block := f.read(HASH_CHUNK):
                sha.update(block)
    except OSError:
        return False
    return sha.hexdigest() == digest


def write_json(path: Path, data: dict) -> None:
    """Write JSON to a temp file unique to this writer, then rename it over `path`."""
    fd, tmp = create_temp(path)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
