"""What a plugin's hook is handed: a registrar that checks and stages each component,
converter, alias and zoo directory, so that a failing plugin adds nothing."""

from __future__ import annotations

import dataclasses
import importlib
import os
import pkgutil
from pathlib import Path
from typing import Any

from . import interfaces
from .component import KINDS, Capabilities, Component
from .converter import Converter
from .hf_alias import Alias
from .kernels import AttentionKernel
from .mixer_kernels import MixerKernel


class RegistryError(Exception):
    """A component lookup or registration that cannot be satisfied."""


class Registrar:
    """Handed to a plugin's hook; stages what it adds so a failing plugin adds nothing."""

    def __init__(self, plugin: str) -> None:
        self.plugin = plugin
        self.components: list[type[Component]] = []
        self.zoo_dirs: list[Path] = []
        self.converters: list[Any] = []
        self.missing: dict[str, str] = {}  # HF model_type -> the mechanism archzoo lacks
        self.kernels: list[AttentionKernel] = []
        self.mixer_kernels: list[MixerKernel] = []

    def add_component(self, cls: type[Component]) -> None:
        """Register one component class (its `kind` and `name` say where it goes)."""
        _check_component_class(cls)
        self.components.append(cls)

    def add_kernel(self, kernel: AttentionKernel) -> None:
        """Register an attention kernel (declared with `archzoo.parts.kernels.attention_kernel`)."""
        if not isinstance(kernel, AttentionKernel):
            raise RegistryError(
                f"attention kernel {kernel!r} is not declared with archzoo.parts.kernels.attention_kernel"
            )
        self.kernels.append(kernel)

    def add_mixer_kernel(self, kernel: MixerKernel) -> None:
        """Register an optional mixer kernel (declared with
        `archzoo.parts.mixer_kernels.mixer_kernel`)."""
        if not isinstance(kernel, MixerKernel):
            raise RegistryError(
                f"mixer kernel {kernel!r} is not declared with "
                "archzoo.parts.mixer_kernels.mixer_kernel"
            )
        self.mixer_kernels.append(kernel)

    def add_converter(self, converter: Any) -> None:
        """Register a Hugging Face converter (an archzoo.parts.converter.Converter instance)."""
        if not isinstance(converter, Converter):
            raise RegistryError(
                f"converter {converter!r} is not an archzoo.parts.converter.Converter instance"
            )
        model_type = getattr(converter, "model_type", None)
        if not isinstance(model_type, str) or not model_type:
            raise RegistryError(f"converter {converter!r} has no model_type")
        for method in ("to_spec", "convert"):
            if not callable(getattr(converter, method, None)):
                raise RegistryError(f"converter for {model_type!r} has no {method}() method")
        self.converters.append(converter)

    def add_alias(self, alias: Alias) -> None:
        """Register an HF model_type that shares a registered converter's layout (one
        `archzoo.parts.hf_alias.Alias` entry)."""
        if not isinstance(alias, Alias):
            raise RegistryError(f"alias {alias!r} is not an archzoo.parts.hf_alias.Alias")
        try:
            converter = alias.converter()
        except (TypeError, ValueError) as exc:
            raise RegistryError(f"alias {alias.model_type!r}: {exc}") from None
        self.add_converter(converter)

    def add_missing_mechanism(self, model_type: str, mechanism: str) -> None:
        """Say which mechanism an HF model_type needs that no component has (its refusal)."""
        if not isinstance(mechanism, str) or not mechanism:
            raise RegistryError(f"missing mechanism of {model_type!r} must be a non-empty string")
        self.missing[model_type] = mechanism

    def add_package(self, package: str) -> None:
        """Register everything a package declares: each component class whose class line
        names it (`class X(Norm, name="x")`), each converter whose class line names its
        `model_type`, each alias of a module's `ALIASES` table and each entry of its
        `MISSING_MECHANISMS` ({model_type: mechanism}) and each attention or mixer kernel it
        declares (`@attention_kernel`, `@mixer_kernel`), in module order, so nothing is
        listed a second time."""
        root = importlib.import_module(package)
        modules = [root]
        if hasattr(root, "__path__"):
            for info in pkgutil.walk_packages(root.__path__, prefix=package + "."):
                modules.append(importlib.import_module(info.name))
        for module in modules:
            for obj in vars(module).values():
                if isinstance(obj, AttentionKernel) and obj.module == module.__name__:
                    self.add_kernel(obj)
                    continue
                if isinstance(obj, MixerKernel) and obj.module == module.__name__:
                    self.add_mixer_kernel(obj)
                    continue
                if not isinstance(obj, type) or obj.__module__ != module.__name__:
                    continue  # imported here, declared elsewhere
                if issubclass(obj, Component) and "name" in vars(obj):
                    self.add_component(obj)
                elif issubclass(obj, Converter) and "model_type" in vars(obj):
                    self.add_converter(obj())
            for alias in vars(module).get("ALIASES", ()):  # a module's table of aliases
                self.add_alias(alias)
            for model_type, why in vars(module).get("MISSING_MECHANISMS", {}).items():
                self.add_missing_mechanism(model_type, why)

    def add_zoo_dir(self, path: str | os.PathLike[str]) -> None:
        """Register a directory of `*.yaml` model specs."""
        p = Path(path)
        if not p.is_dir():
            raise RegistryError(f"zoo directory {str(p)!r} does not exist")
        self.zoo_dirs.append(p)


def _check_component_class(cls: Any) -> None:
    where = getattr(cls, "__qualname__", repr(cls))
    if not (isinstance(cls, type) and issubclass(cls, Component)):
        raise RegistryError(f"{where} is not a subclass of archzoo.Component")
    if cls.kind not in KINDS:
        raise RegistryError(f"{where} has kind {cls.kind!r}; expected one of {list(KINDS)}")
    base = _interface_of(cls.kind)
    if not issubclass(cls, base):
        raise RegistryError(
            f"{where} has kind {cls.kind!r} but does not subclass "
            f"archzoo.parts.interfaces.{base.__name__}"
        )
    if not isinstance(cls.capabilities, Capabilities):
        raise RegistryError(f"{where}.capabilities is not an archzoo.Capabilities")
    if not isinstance(cls.name, str) or not cls.name.isidentifier():
        raise RegistryError(f"{where} has name {cls.name!r}; expected an identifier")
    if not dataclasses.is_dataclass(cls.Config):
        raise RegistryError(f"{where}.Config is not a dataclass")
    for f in dataclasses.fields(cls.Config):
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise RegistryError(f"{where}.Config.{f.name} has no default")


def _interface_of(kind: str) -> type[Component]:
    """The interface base class every component of `kind` must subclass."""
    bases = (
        interfaces.Embedding,
        interfaces.Position,
        interfaces.Attention,
        interfaces.Norm,
        interfaces.Block,
        interfaces.FeedForward,
        interfaces.Sharing,
        interfaces.Head,
    )
    return {b.kind: b for b in bases}[kind]
