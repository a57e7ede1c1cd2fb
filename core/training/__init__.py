"""Training and controlled comparisons of zoo models (`zoo train`, `zoo compare`)."""

from __future__ import annotations

from typing import Any

from .config import TrainConfig
from .schedule import lr_factor

__all__ = ["TrainConfig", "lr_factor", "read_metrics", "train"]


def __getattr__(name: str) -> Any:
    """The loop (and torch.distributed) load on first use, keeping `zoo --help` fast."""
    if name in ("train", "read_metrics"):
        from . import loop

        return getattr(loop, name)
    raise AttributeError(f"module 'archzoo.training' has no attribute {name!r}")
