"""What the built-in mixer kernels share."""

from __future__ import annotations

from typing import Any

from torch import Tensor


def no_documents(*, docs: Tensor | None = None, **facts: Any) -> str | None:
    """Refuse packed rows: the kernel's state would cross a document boundary."""
    return None if docs is None else "document ids (packed rows) restart the state"
