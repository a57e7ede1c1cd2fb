"""An example archzoo plugin: ScaleNorm, talking-heads and QK-norm attention, a chunked
attention kernel, zoo specs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from archzoo import hookimpl

from . import chunked as chunked_module
from .chunked import chunked
from .qk_norm import QKNormAttention
from .scalenorm import ScaleNorm
from .talking_heads import TalkingHeadsAttention

__all__ = [
    "QKNormAttention",
    "ScaleNorm",
    "TalkingHeadsAttention",
    "archzoo_register",
    "chunked",
    "chunked_module",
]

ZOO_DIR = Path(__file__).parent / "zoo"


@hookimpl
def archzoo_register(registrar: Any) -> None:
    """Add this plugin's components, its attention kernel and its directory of zoo specs."""
    registrar.add_component(ScaleNorm)
    registrar.add_component(TalkingHeadsAttention)
    registrar.add_component(QKNormAttention)
    registrar.add_kernel(chunked)
    registrar.add_zoo_dir(ZOO_DIR)
