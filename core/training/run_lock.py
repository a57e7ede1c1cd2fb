"""One `zoo train` per run directory: OUT/.zoo-train.lock, flock'd, holding the owner's PID.

The kernel drops an flock when its process ends, however it ends, so a lock left by a
SIGKILLed run never blocks the next one; the PID in the file is only there to name the owner.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # no flock on this platform: runs are not locked
    fcntl = None  # type: ignore[assignment]

LOCK_NAME = ".zoo-train.lock"


@contextlib.contextmanager
def run_lock(out: Path, take: bool = True) -> Iterator[None]:
    """Hold OUT's lock for the block (creating OUT); refuse if another process holds it.

    A directory this call created that holds no file at the end is removed again, so a
    refused run leaves nothing behind."""
    if not take:
        yield
        return
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    path = out / LOCK_NAME
    fd = _acquire(path, out)
    try:
        yield
    finally:
        if fd is not None:
            with contextlib.suppress(OSError):
                os.unlink(path)  # while still holding it: see _acquire
            os.close(fd)
        if created:  # everything under it is this run's: remove the empty folders
            for d in sorted(out.rglob("*"), reverse=True):
                with contextlib.suppress(OSError):
                    d.rmdir()  # only folders, and only empty ones
            with contextlib.suppress(OSError):
                out.rmdir()


def _acquire(path: Path, out: Path) -> int | None:
    """The locked file's descriptor, with this PID written in it (None: no locking here)."""
    if fcntl is None:
        return None
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = _owner(fd)
            os.close(fd)
            raise ValueError(
                f"--out {out} is in use by {owner} (another zoo train); wait for it to end "
                "or choose another --out"
            ) from None
        except OSError:  # a file system without locks (ENOLCK): run unlocked, as before
            os.close(fd)
            return None
        try:  # the owner before us may have unlinked the file between our open and lock
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


def _owner(fd: int) -> str:
    """'PID N' from the lock file (its owner writes it just after locking: wait a little)."""
    for _ in range(20):
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        if text.isdigit():
            return f"PID {text}"
        time.sleep(0.05)
    return "another process"
