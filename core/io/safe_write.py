"""Write safetensors files without NumPy, atomically, keeping the old file's permissions."""

from __future__ import annotations

import ctypes
import json
import os
import secrets
import stat
import struct
import sys
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path

import torch

from ..errors import WeightsError

# `.NAME.PID-THREAD-RANDOM.archzoo-tmp` beside the target while writing: one per writer
TEMP_SUFFIX = ".archzoo-tmp"

DTYPE_NAMES: dict[torch.dtype, str] = {
    torch.float64: "F64",
    torch.float32: "F32",
    torch.float16: "F16",
    torch.bfloat16: "BF16",
    torch.int64: "I64",
    torch.int32: "I32",
    torch.int16: "I16",
    torch.int8: "I8",
    torch.uint8: "U8",
    torch.bool: "BOOL",
    torch.float8_e4m3fn: "F8_E4M3",
    torch.float8_e5m2: "F8_E5M2",
    torch.complex64: "C64",
}
for _dtype, _name in (("uint16", "U16"), ("uint32", "U32"), ("uint64", "U64")):
    if hasattr(torch, _dtype):
        DTYPE_NAMES[getattr(torch, _dtype)] = _name


def check_out_path(path: str | os.PathLike[str], inputs: Iterable[Path] = ()) -> Path:
    """Refuse an output path that would lose data or cannot be written; checked before work."""
    p = Path(path)
    parent = p.parent
    if not parent.is_dir():
        raise WeightsError(f"cannot write {p}: directory {parent} does not exist")
    if p.is_symlink():
        raise WeightsError(
            f"cannot write {p}: it is a symbolic link (to {os.readlink(p)}); "
            "name the real file instead"
        )
    if p.exists():
        mode = p.stat().st_mode
        if not stat.S_ISREG(mode):
            raise WeightsError(f"cannot write {p}: it exists and is not a regular file")
        for src in inputs:
            if src.exists() and os.path.samefile(p, src):
                raise WeightsError(f"cannot write {p}: it is an input of this command ({src})")
    if not os.access(parent, os.W_OK):
        raise WeightsError(f"cannot write {p}: directory {parent} is not writable")
    return p


def header_bytes(tensors: Mapping[str, torch.Tensor], metadata: Mapping[str, str]) -> bytes:
    """The safetensors header: 8-byte little-endian length, then JSON padded to 8 bytes."""
    header: dict[str, object] = {"__metadata__": dict(metadata)} if metadata else {}
    offset = 0
    for name, t in tensors.items():
        if t.dtype not in DTYPE_NAMES:
            raise WeightsError(
                f"tensor {name!r} has dtype {t.dtype}, which safetensors cannot store"
            )
        size = t.numel() * t.element_size()
        header[name] = {
            "dtype": DTYPE_NAMES[t.dtype],
            "shape": list(t.shape),
            "data_offsets": [offset, offset + size],
        }
        offset += size
    raw = json.dumps(header, separators=(",", ":")).encode("utf-8")
    raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw


def _raw(t: torch.Tensor) -> memoryview:
    """The bytes of a contiguous CPU tensor, without copying (no NumPy needed)."""
    n = t.numel() * t.element_size()
    return memoryview((ctypes.c_ubyte * n).from_address(t.data_ptr())).cast("B")


def remove_stale_temps(target: Path, suffix: str = TEMP_SUFFIX) -> None:
    """Delete temp files of earlier saves to `target` whose writing process is gone."""
    for tmp in target.parent.glob(f".{target.name}.*{suffix}"):
        pid = tmp.name[len(target.name) + 2 : -len(suffix)].split("-", 1)[0]
        if not pid.isdigit() or _alive(int(pid)):
            continue
        tmp.unlink(missing_ok=True)


def create_temp(target: Path, suffix: str = TEMP_SUFFIX) -> tuple[int, Path]:
    """A new temp file beside `target`, named for this process and thread plus a random part
    and created exclusively: two writers (threads or processes) never share one."""
    remove_stale_temps(target, suffix)
    while True:
        tag = f"{os.getpid()}-{threading.get_ident()}-{secrets.token_hex(4)}"
        tmp = target.parent / f".{target.name}.{tag}{suffix}"
        try:  # the umask applies to the mode
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666), tmp
        except FileExistsError:  # a 1 in 4 billion draw: draw again
            continue


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def write_safetensors(
    path: str | os.PathLike[str], tensors: Mapping[str, torch.Tensor], metadata: Mapping[str, str]
) -> None:
    """Write tensors to a temp file beside `path`, then rename it over `path` in one step."""
    if sys.byteorder != "little":
        raise WeightsError("saving safetensors needs a little-endian machine")
    target = check_out_path(path)
    ready = {k: t.detach().to("cpu").contiguous() for k, t in tensors.items()}
    head = header_bytes(ready, metadata)
    try:
        fd, tmp = create_temp(target)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise WeightsError(f"cannot write {target}: {reason}; no file was changed") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(head)
            for t in ready.values():
                if t.numel():
                    f.write(_raw(t))
            f.flush()
            os.fsync(f.fileno())
        if target.exists():  # keep the permissions of the file being replaced
            os.chmod(tmp, stat.S_IMODE(target.stat().st_mode))
        os.replace(tmp, target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        reason = exc.strerror or str(exc)
        raise WeightsError(f"cannot write {target}: {reason}; no file was changed") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
