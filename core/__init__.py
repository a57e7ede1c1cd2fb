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
    from .builder import build_model
    from .component import Capabilities, Component, param
    from .converter import ConversionError, Converter
    from .errors import Location, SpecError, SpecIssue
    from .hf_export import to_hf
    from .hf_import import from_hf
    from .hooks import hookimpl
    from .model import ModelOutput, ZooModel
    from .model_source import load, resolve_model
    from .registry import Registry, RegistryError, get_registry, list_attention_impls
    from .spec import Spec, load_spec
    from .weights import WeightsError, save

# public name -> the module of this package that defines it
_EXPORTS = {
    "build_model": "builder",
    "Capabilities": "component",
    "Component": "component",
    "param": "component",
    "ConversionError": "converter",
    "Converter": "converter",
    "Location": "errors",
    "SpecError": "errors",
    "SpecIssue": "errors",
    "from_hf": "hf_import",
    "to_hf": "hf_export",
    "hookimpl": "hooks",
    "ModelOutput": "model",
    "ZooModel": "model",
    "Registry": "registry",
    "RegistryError": "registry",
    "get_registry": "registry",
    "list_attention_impls": "registry",
    "Spec": "spec",
    "load_spec": "spec",
    "WeightsError": "weights",
    "load": "model_source",
    "resolve_model": "model_source",
    "save": "weights",
}

# torch warns on import when NumPy is absent; archzoo never uses NumPy, so keep that warning
# out of `zoo` output. The filter matches only that message, which torch emits only while it
# is being imported, whichever archzoo module imports it first.
if "torch" not in sys.modules:
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy", category=UserWarning)


def __getattr__(name: str) -> Any:
    """Import the module of a public name on first use (torch with it, where it needs it)."""
    module = _EXPORTS.get(name)
    if module is None:  # a submodule (`archzoo.spec.list_models`), imported eagerly before
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
    from .registry import get_registry

    return get_registry().components(kind)


def list_models() -> list[str]:
    """Names of every zoo spec (built-in and from plugins)."""
    from .spec import list_models as names

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
    "list_models",
    "load",
    "load_spec",
    "param",
    "resolve_model",
    "save",
    "to_hf",
]
