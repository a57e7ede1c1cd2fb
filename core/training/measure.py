"""What `zoo compare` reports besides losses: training FLOPs per token and peak memory."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn


def matmul_params(model: nn.Module) -> int:
    """Weights that take part in a matrix product per token (Linear layers, each use counted)."""
    return sum(m.weight.numel() for m in model.modules() if isinstance(m, nn.Linear))


def train_flops_per_token(model: nn.Module, seq_len: int) -> int:
    """6N + 12 L d T (PaLM appendix B): matmul weights plus attention scores, forward + backward."""
    spec = model.spec
    attention = 0
    for which in spec.stacks():
        cfg = spec.stack(which)
        attention += 12 * cfg["n_layers"] * cfg["n_heads"] * cfg["head_dim"] * seq_len
    return 6 * matmul_params(model) + attention


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
