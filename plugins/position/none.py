"""No position information (a bag of tokens, or order from the attention pattern alone)."""

from __future__ import annotations

from archzoo.parts.interfaces import Position


class NoPosition(Position, name="none"):
    """no position information at all"""
