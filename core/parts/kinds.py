"""The component kinds, in build order (no torch: the `zoo` CLI reads them for --help)."""

from __future__ import annotations

KINDS: tuple[str, ...] = (
    "embedding",
    "position",
    "attention",
    "norm",
    "block",
    "ffn",
    "sharing",
    "head",
)
