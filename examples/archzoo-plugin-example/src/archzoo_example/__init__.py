"""An example archzoo plugin: ScaleNorm, talking-heads and QK-norm attention, zoo specs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from archzoo import hookimpl

from .qk_norm import QKNormAttention
from .scalenorm import ScaleNorm
from .talking_heads import TalkingHeadsAttention

__all__ = ["QKNormAttention", "ScaleNorm", "TalkingHeadsAttention", "archzoo_register"]

ZOO_DIR = Path(__file__).parent / "zoo"


@hookimpl
def archzoo_register(registrar: Any) -> None:
    """Add this plugin's components and its directory of zoo specs."""
    registrar.add_component(ScaleNorm)
    registrar.add_component(TalkingHeadsAttention)
    registrar.add_component(QKNormAttention)
    registrar.add_zoo_dir(ZOO_DIR)
