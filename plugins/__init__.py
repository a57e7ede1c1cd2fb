"""Built-in components and HF converters, registered through the same hook a third-party plugin uses.

Each component and converter declares itself in its class line (`class X(Norm, name="x")`,
`class Y(Converter, model_type="y")`); `add_package` finds them, so nothing is listed twice.
"""

from __future__ import annotations

from typing import Any

from archzoo.parts.hooks import hookimpl


@hookimpl
def archzoo_register(registrar: Any) -> None:
    """Register every built-in component and converter declared under this package."""
    registrar.add_package(__name__)
