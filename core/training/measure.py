"""What `zoo compare` reports besides losses: training FLOPs per token and peak memory."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from ..parts.costs import model_costs


def train_flops_per_token(model: nn.Module, seq_len: int) -> int:
    """Training FLOPs per token at context seq_len: 3 x the forward count (backward is 2x)."""
    return 3 * model_costs(model, seq_len)["flops_per_token"]


class PeakMemory:
    """Peak memory while a run lasts: CUDA allocator peak, or the process's resident-set peak."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.start = 0
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
            self.start = torch.cuda.memory_allocated(device)
        elif _reset_rss_peak():
            self.start = _status_kib("VmRSS") * 1024

    def peak_bytes(self) -> int | None:
        """Peak above the memory in use when measuring started (None if unknown here)."""
        if self.device.type == "cuda":
            return torch.cuda.max_memory_allocated(self.device) - self.start
        hwm = _status_kib("VmHWM")
        return None if hwm is None or not self.start else max(hwm * 1024 - self.start, 0)


def _reset_rss_peak() -> bool:
    """Linux: writing 5 to clear_refs resets the peak resident set (VmHWM) to the current one."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _status_kib(key: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        return None
    return None
