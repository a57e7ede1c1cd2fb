"""archzoo: a plugin-based zoo of transformer architectures."""

from __future__ import annotations

import warnings

__version__ = "0.1.0"

# torch warns on import when NumPy is absent; archzoo never uses NumPy, so keep that warning
# out of `zoo` output (scoped: the user's own warning filters are left as they are)
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy", category=UserWarning)
    import torch  # noqa: F401

from .builder import build_model  # noqa: E402
from .component import Capabilities, Component, param  # noqa: E402
from .converter import ConversionError, Converter  # noqa: E402
from .errors import Location, SpecError, SpecIssue  # noqa: E402
from .hf_import import from_hf  # noqa: E402
from .hooks import hookimpl  # noqa: E402
from .model import ModelOutput, ZooModel  # noqa: E402
from .registry import Registry, RegistryError, get_registry  # noqa: E402
from .spec import Spec, load_spec  # noqa: E402
from .spec import list_models as _list_models  # noqa: E402
from .weights import WeightsError, load, save  # noqa: E402


def list_components(kind: str | None = None) -> list[type[Component]]:
    """Registered component classes, optionally of one kind."""
    return get_registry().components(kind)


def list_models() -> list[str]:
    """Names of every zoo spec (built-in and from plugins)."""
    return _list_models()


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
    "list_components",
    "list_models",
    "load",
    "load_spec",
    "param",
    "save",
]
