"""archzoo: a plugin-based zoo of transformer architectures.

The public names below load on first use (PEP 562), so `import archzoo` and the `zoo`
command's --help do not import torch; `archzoo.build_model`, `from archzoo import Spec`
and every other use work as before.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import warnings
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from .errors import Location, SpecError, SpecIssue
    from .hf.exporter import to_hf
    from .hf.importer import from_hf
    from .io.weights import WeightsError, save
    from .model.builder import build_model
    from .model.zoo_model import ModelOutput, ZooModel
    from .model_source import load, resolve_model
    from .parts.component import Capabilities, Component, param
    from .parts.converter import Converter
    from .parts.hooks import hookimpl
    from .parts.registry import (
        Registry,
        RegistryError,
        get_registry,
        list_attention_impls,
        list_mixer_impls,
    )
    from .parts.tensor_source import ConversionError
    from .specs.spec import Spec, load_spec

# public name -> the module of this package that defines it
_EXPORTS = {
    "build_model": "model.builder",
    "Capabilities": "parts.component",
    "Component": "parts.component",
    "param": "parts.component",
    "ConversionError": "parts.tensor_source",
    "Converter": "parts.converter",
    "Location": "errors",
    "SpecError": "errors",
    "SpecIssue": "errors",
    "from_hf": "hf.importer",
    "to_hf": "hf.exporter",
    "hookimpl": "parts.hooks",
    "ModelOutput": "model.zoo_model",
    "ZooModel": "model.zoo_model",
    "Registry": "parts.registry",
    "RegistryError": "parts.registry",
    "get_registry": "parts.registry",
    "list_attention_impls": "parts.registry",
    "list_mixer_impls": "parts.registry",
    "Spec": "specs.spec",
    "load_spec": "specs.spec",
    "WeightsError": "io.weights",
    "load": "model_source",
    "resolve_model": "model_source",
    "save": "io.weights",
}

# torch warns on import when NumPy is absent; archzoo never uses NumPy, so keep that warning
# out of `zoo` output. The filter matches only that message, which torch emits only while it
# is being imported, whichever archzoo module imports it first.
if "torch" not in sys.modules:
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy", category=UserWarning)


def __getattr__(name: str) -> Any:
    """Import the module of a public name on first use (torch with it, where it needs it)."""
    module = _EXPORTS.get(name)
    if module is None:  # a submodule (`archzoo.specs`), imported eagerly before
        if name.startswith("_") or importlib.util.find_spec(f"{__name__}.{name}") is None:
            raise AttributeError(f"module 'archzoo' has no attribute {name!r}")
        return importlib.import_module(f".{name}", __name__)
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The loaded names and the ones still to load."""
    return sorted({*globals(), *_EXPORTS})


def list_components(kind: str | None = None) -> list[type[Component]]:
    """Registered component classes, optionally of one kind."""
    from .parts.registry import get_registry

    return get_registry().components(kind)


def list_models() -> list[str]:
    """Names of every zoo spec (built-in and from plugins)."""
    from .specs.spec import list_models as names

    return names()


__all__ = [
    "Capabilities",
    "Component",
    "ConversionError",
    "Converter",
    "Location",
    "ModelOutput",
    "Registry",
    "RegistryError",
    "Spec",
    "SpecError",
    "SpecIssue",
    "WeightsError",
    "ZooModel",
    "build_model",
    "from_hf",
    "get_registry",
    "hookimpl",
    "list_attention_impls",
    "list_components",
    "list_mixer_impls",
    "list_models",
    "load",
    "load_spec",
    "param",
    "resolve_model",
    "save",
    "to_hf",
]
