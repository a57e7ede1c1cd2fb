"""The pluggy hook a plugin implements to add components and zoo specs."""

from __future__ import annotations

from typing import Any

import pluggy

PROJECT = "archzoo"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


class ArchzooSpec:
    """Hook specifications of the `archzoo` project."""

    @hookspec
    def archzoo_register(self, registrar: Any) -> None:
        """Add component classes and zoo spec directories through `registrar`."""
