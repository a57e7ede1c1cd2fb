"""The component kinds, in build order, and the stacks of an encoder-decoder spec (no torch:
the `zoo` CLI reads them for --help)."""

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
STACKS: tuple[str, ...] = ("encoder", "decoder")  # sections of an encoder-decoder spec
