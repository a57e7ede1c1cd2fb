"""Memory a piece of work will need, checked against what the device has before allocating.

Work whose size is known beforehand (a model's weights, a generation's KV cache, a dense
attention mask) asks `check_fits` first, so a request far beyond the machine is refused
with the number instead of failing inside the allocator or being killed by the OS.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch


class MemoryNeedError(ValueError):
    """The estimated memory of a request exceeds what the device has available."""


def format_bytes(n: float) -> str:
    """Bytes in binary units: '1.5 GiB'."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def _meminfo(key: str) -> int | None:
    """A /proc/meminfo entry in bytes (Linux), or None."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            name, _, rest = line.partition(":")
            if name == key:
                return int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _address_space_left() -> int | None:
    """What a soft RLIMIT_AS still allows this process to map, or None when unlimited."""
    try:
        import resource
    except ImportError:  # not a POSIX system
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return None
    try:
        status = Path("/proc/self/status").read_text()
        used = next(int(x.split()[1]) * 1024 for x in status.splitlines() if x.startswith("VmSize"))
    except (OSError, StopIteration, ValueError, IndexError):
        used = 0
    return max(soft - used, 0)


def available_bytes(device: torch.device | str) -> int | None:
    """Memory that `device` can still give (free accelerator memory, or the host's
    available memory within this process's address-space limit); None when unknown."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    if device.type != "cpu":
        return None
    free = _meminfo("MemAvailable")
    if free is None:
        try:
            free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            free = None
    left = _address_space_left()
    if free is None or left is None:
        return left if free is None else free
    return min(free, left)


def check_fits(needed: int, device: torch.device | str, what: str, hint: str = "") -> None:
    """Raise MemoryNeedError when `needed` bytes exceed what `device` has available."""
    free = available_bytes(device)
    if free is None or needed <= free:
        return
    raise MemoryNeedError(
        f"{what} needs about {format_bytes(needed)} ({needed:,} bytes) on {device}, but only "
        f"{format_bytes(free)} is available{'; ' + hint if hint else ''}"
    )
