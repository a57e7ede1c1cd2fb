"""Files of an HF export: safetensors shards streamed one tensor at a time, an index, JSON,
all in a temporary directory that replaces the target in one rename (or is removed)."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from ..errors import WeightsError
from ..io.progress import progress_bar
from ..io.safe_write import _alive, _raw, header_bytes

# `.NAME.PID-THREAD-RANDOM.archzoo-export-tmp` beside the target: one per writer
TEMP_SUFFIX = ".archzoo-export-tmp"
DEFAULT_SHARD_SIZE = 5 * 10**9  # bytes: files above this are split (the Hub's usual 5GB)
_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "KIB": 2**10, "MIB": 2**20}
_UNITS["GIB"] = 2**30


def parse_size(size: int | str) -> int:
    """A shard size in bytes from an int or text such as '5GB', '500MB', '2GiB'."""
    if isinstance(size, int) and not isinstance(size, bool):
        value = size
    else:
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", str(size))
        unit = m.group(2).upper() if m else None
        if m is None or unit not in _UNITS:
            raise ValueError(f"shard size {size!r}: expected bytes or a number with KB/MB/GB")
        value = int(float(m.group(1)) * _UNITS[unit])
    if value < 1:
        raise ValueError(f"shard size {size!r} must be at least 1 byte")
    return value


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def plan_shards(tensors: Mapping[str, torch.Tensor], max_size: int) -> list[list[str]]:
    """Tensor names per file, in order; a file closes before the tensor that would pass
    `max_size` (a tensor larger than it gets a file of its own)."""
    shards: list[list[str]] = [[]]
    size = 0
    for name, t in tensors.items():
        if shards[-1] and size + _nbytes(t) > max_size:
            shards.append([])
            size = 0
        shards[-1].append(name)
        size += _nbytes(t)
    return shards


def write_shards(
    directory: Path, tensors: Mapping[str, torch.Tensor], max_size: int, desc: str | None = None
) -> dict[str, str]:
    """model.safetensors, or model-0000i-of-0000n.safetensors and their index: each tensor
    made contiguous on the CPU only while its bytes are written. Returns name -> file.
    `desc` names a progress bar of the bytes written (stderr; see archzoo.io.progress)."""
    if sys.byteorder != "little":
        raise WeightsError("saving safetensors needs a little-endian machine")
    shards = plan_shards(tensors, max_size)
    n = len(shards)
    files = (
        ["model.safetensors"]
        if n == 1
        else [f"model-{i + 1:05d}-of-{n:05d}.safetensors" for i in range(n)]
    )
    weight_map: dict[str, str] = {}
    total = sum(_nbytes(t) for t in tensors.values())
    bar = progress_bar(total, desc, "B") if desc else None
    for file, names in zip(files, shards, strict=True):
        part = {name: tensors[name] for name in names}
        with open(directory / file, "wb") as f:
            f.write(header_bytes(part, {"format": "pt"}))  # shapes and dtypes only: no copies
            for t in part.values():
                if t.numel():
                    ready = t.detach().to("cpu").contiguous()  # one tensor at a time
                    f.write(_raw(ready))
                    del ready
                if bar is not None:
                    bar.update(_nbytes(t))
            f.flush()
            os.fsync(f.fileno())
        weight_map.update(dict.fromkeys(names, file))
    if bar is not None:
        bar.close()
    if n > 1:
        write_json(
            directory / "model.safetensors.index.json",
            {"metadata": {"total_size": total}, "weight_map": weight_map},
        )
    return weight_map


def write_json(path: Path, data: Any) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
        f.flush()
        os.fsync(f.fileno())


def check_target(target: Path, *, overwrite: bool = False, inputs: Iterable[Path] = ()) -> None:
    """Refuse a target that cannot take the export, before any work. The export replaces
    the whole directory, so it must be neither the current directory (nor hold it) nor
    one of `inputs` (nor hold one): `--hf SRC --force` would delete the source's files."""
    here = _spellings(Path.cwd())
    if _spellings(target) & ({p for h in here for p in (h, *h.parents)}):
        raise WeightsError(
            f"cannot write {target}: it is the current directory or holds it; "
            "name a new directory to export to"
        )
    for item in inputs:
        inside = {p for s in _spellings(Path(item)) for p in (s, *s.parents)}
        if _spellings(target) & inside:
            how = "is" if _spellings(target) & _spellings(Path(item)) else "holds"
            raise WeightsError(
                f"cannot write {target}: it {how} the input {item}; an export replaces its "
                "target directory and never deletes its own inputs: name a new directory"
            )
    if not target.parent.is_dir():
        raise WeightsError(f"cannot write {target}: directory {target.parent} does not exist")
    if target.is_symlink() or (target.exists() and not target.is_dir()):
        raise WeightsError(f"cannot write {target}: it exists and is not a directory")
    if target.is_dir() and any(target.iterdir()) and not overwrite:
        raise WeightsError(
            f"cannot write {target}: the directory is not empty (choose a new directory, "
            "or overwrite it: to_hf(..., overwrite=True) / zoo export --force)"
        )
    if not os.access(target.parent, os.W_OK):
        raise WeightsError(f"cannot write {target}: directory {target.parent} is not writable")


def _spellings(path: Path) -> set[Path]:
    """`path` made absolute as written and with links resolved (a link and its target)."""
    return {Path(os.path.abspath(path)), path.resolve()}


@contextmanager
def staged_directory(target: Path) -> Iterator[Path]:
    """A temp directory beside `target`, unique to this writer (process and thread); moved onto
    `target` when the block ends without error, removed otherwise (the target is then
    untouched). Two exports to one target leave one of them whole, or refuse the other."""
    _remove_stale(target)
    tmp, old = _unique_dir(target), None
    try:
        yield tmp
        try:
            if target.is_dir():  # checked empty or overwritable before the work began
                old = _unique_dir(target)  # an empty directory: the rename replaces it
                os.replace(target, old)
            os.replace(tmp, target)
        except OSError as exc:
            if old is not None and not target.exists():
                os.replace(old, target)  # put the previous export back
            reason = exc.strerror or str(exc)
            raise WeightsError(
                f"cannot write {target}: {reason} (another export wrote it meanwhile?); "
                "nothing of this export was kept"
            ) from None
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None and old.exists():
            shutil.rmtree(old, ignore_errors=True)
        raise


def _unique_dir(target: Path) -> Path:
    """A new, empty directory `.NAME.PID-THREAD-RANDOM.archzoo-export-tmp` beside `target`."""
    prefix = f".{target.name}.{os.getpid()}-{threading.get_ident()}-"
    return Path(tempfile.mkdtemp(prefix=prefix, suffix=TEMP_SUFFIX, dir=target.parent))


def _remove_stale(target: Path) -> None:
    """Remove staging directories of exports to `target` whose process is gone."""
    for tmp in target.parent.glob(f".{target.name}.*{TEMP_SUFFIX}"):
        pid = tmp.name[len(target.name) + 2 : -len(TEMP_SUFFIX)].split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(tmp, ignore_errors=True)
