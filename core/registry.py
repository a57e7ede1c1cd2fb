"""Component registry on pluggy: built-ins and entry points go through one hook."""

from __future__ import annotations

import dataclasses
import difflib
import functools
import importlib
import importlib.metadata
import os
import pkgutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pluggy

from .component import KINDS, Capabilities, Component
from .converter import Converter
from .hf_alias import Alias
from .hooks import PROJECT, ArchzooSpec
from .plugin_guard import DISABLE_ENV, NO_PLUGINS_ENV, loading_plugin, plugins_off

ENTRY_POINT_GROUP = "archzoo"


class RegistryError(Exception):
    """A component lookup or registration that cannot be satisfied."""


@dataclass
class PluginInfo:
    """What the registry knows about one plugin: where it came from and what it added."""

    name: str
    distribution: str | None = None
    version: str | None = None
    status: str = "ok"  # ok | failed | disabled
    error: str | None = None
    components: list[str] = field(default_factory=list)
    zoo_dirs: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class UnknownComponent:
    """A lookup of a name no plugin registered: the known names, close ones, failed plugins."""

    kind: str
    name: str
    known: list[str]
    close: list[str]
    not_loaded: list[str]  # "plugin (why)" of each plugin that failed or is disabled

    @property
    def closest(self) -> str | None:
        return self.close[0] if self.close else None

    def message(self, *, suggest: bool = True) -> str:
        """One line; `suggest=False` leaves the "did you mean" to the caller."""
        msg = f"unknown {self.kind} component {self.name!r}"
        if suggest and self.close:
            msg += f" (did you mean {', '.join(repr(c) for c in self.close)}?)"
        if self.not_loaded:
            msg += "; note: plugin(s) not loaded: " + "; ".join(self.not_loaded)
        return msg + f"; known: {', '.join(self.known)}"


class Registrar:
    """Handed to a plugin's hook; stages what it adds so a failing plugin adds nothing."""

    def __init__(self, plugin: str) -> None:
        self.plugin = plugin
        self.components: list[type[Component]] = []
        self.zoo_dirs: list[Path] = []
        self.converters: list[Any] = []
        self.missing: dict[str, str] = {}  # HF model_type -> the mechanism archzoo lacks

    def add_component(self, cls: type[Component]) -> None:
        """Register one component class (its `kind` and `name` say where it goes)."""
        _check_component_class(cls)
        self.components.append(cls)

    def add_converter(self, converter: Any) -> None:
        """Register a Hugging Face converter (an archzoo.converter.Converter instance)."""
        if not isinstance(converter, Converter):
            raise RegistryError(
                f"converter {converter!r} is not an archzoo.converter.Converter instance"
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
        `archzoo.hf_alias.Alias` entry)."""
        if not isinstance(alias, Alias):
            raise RegistryError(f"alias {alias!r} is not an archzoo.hf_alias.Alias")
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
        `MISSING_MECHANISMS` ({model_type: mechanism}), in module order, so
        nothing is listed a second time."""
        root = importlib.import_module(package)
        modules = [root]
        if hasattr(root, "__path__"):
            for info in pkgutil.walk_packages(root.__path__, prefix=package + "."):
                modules.append(importlib.import_module(info.name))
        for module in modules:
            for obj in vars(module).values():
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
            f"archzoo.interfaces.{base.__name__}"
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
    from . import interfaces

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


class Registry:
    """Maps (kind, name) to component classes, and remembers every plugin's outcome."""

    def __init__(self, *, load_entry_points: bool = True) -> None:
        self.pm = pluggy.PluginManager(PROJECT)
        self.pm.add_hookspecs(ArchzooSpec)
        self._components: dict[tuple[str, str], tuple[type[Component], str]] = {}
        self._converters: dict[str, tuple[Any, str]] = {}
        self._missing: dict[str, tuple[str, str]] = {}  # model_type -> (mechanism, plugin)
        self.plugins: dict[str, PluginInfo] = {}
        self.zoo_dirs: list[Path] = []
        builtins = importlib.import_module("archzoo.plugins")
        self.register_plugin(builtins, "builtins", distribution="archzoo")
        if load_entry_points:
            self._load_entry_points()

    def __deepcopy__(self, memo: dict[int, Any]) -> Registry:
        """The registry is the process's table of plugins, not a model's state: a deep copy
        of a model (EMA, a frozen teacher, AveragedModel) shares it."""
        return self

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        """Pickled by reference (its plugin manager holds modules): a pickled model loads
        with the loading process's own registry."""
        return (get_registry, ())

    def register_plugin(
        self,
        plugin: Any,
        name: str,
        *,
        distribution: str | None = None,
        version: str | None = None,
    ) -> PluginInfo:
        """Register a plugin object (module or instance) and run its hook in isolation."""
        info = PluginInfo(name=name, distribution=distribution, version=version)
        self.plugins[name] = info
        try:
            self.pm.register(plugin, name=name)
        except Exception as exc:  # noqa: BLE001 - reported, not raised
            info.status, info.error = "failed", f"invalid plugin: {exc}"
            return info
        registrar = Registrar(name)
        others = [p for p in self.pm.get_plugins() if p is not plugin]
        try:
            self.pm.subset_hook_caller("archzoo_register", others)(registrar=registrar)
            self._commit(registrar)
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - a broken plugin must not break the rest
            info.status, info.error = "failed", f"{type(exc).__name__}: {exc}"
            self.pm.unregister(plugin)
            return info
        info.components = [f"{c.kind}:{c.name}" for c in registrar.components]
        info.components += [f"converter:{c.model_type}" for c in registrar.converters]
        info.zoo_dirs = [str(p) for p in registrar.zoo_dirs]
        return info

    def unregister_plugin(self, name: str) -> None:
        """Remove a plugin and everything it registered (used by tests)."""
        plugin = self.pm.get_plugin(name)
        if plugin is not None:
            self.pm.unregister(plugin)
        info = self.plugins.pop(name, None)
        self._components = {k: v for k, v in self._components.items() if v[1] != name}
        self._converters = {k: v for k, v in self._converters.items() if v[1] != name}
        self._missing = {k: v for k, v in self._missing.items() if v[1] != name}
        if info:
            self.zoo_dirs = [p for p in self.zoo_dirs if str(p) not in info.zoo_dirs]

    def _commit(self, registrar: Registrar) -> None:
        seen: dict[tuple[str, str], str] = {}
        for cls in registrar.components:
            key = (cls.kind, cls.name)
            if key in self._components:
                other = self._components[key][1]
                raise RegistryError(
                    f"duplicate component {cls.kind}:{cls.name}: registered by plugin "
                    f"{other!r} and again by plugin {registrar.plugin!r}; kept {other!r}'s"
                )
            if key in seen:
                raise RegistryError(
                    f"duplicate component {cls.kind}:{cls.name} within plugin {registrar.plugin!r}"
                )
            seen[key] = registrar.plugin
        self._check_zoo_names(registrar)
        types: set[str] = set()
        for conv in registrar.converters:
            if conv.model_type in self._converters or conv.model_type in types:
                other = self._converters.get(conv.model_type, (None, registrar.plugin))[1]
                raise RegistryError(
                    f"duplicate converter for model_type {conv.model_type!r}: registered by "
                    f"plugin {other!r} and again by plugin {registrar.plugin!r}; kept {other!r}'s"
                )
            types.add(conv.model_type)
        for cls in registrar.components:
            self._components[(cls.kind, cls.name)] = (cls, registrar.plugin)
        for conv in registrar.converters:
            self._converters[conv.model_type] = (conv, registrar.plugin)
        self._missing.update({t: (m, registrar.plugin) for t, m in registrar.missing.items()})
        self.zoo_dirs.extend(registrar.zoo_dirs)

    def zoo_owners(self) -> dict[str, tuple[Path, str]]:
        """Zoo model name -> (spec file, plugin), built-in zoo first."""
        from importlib import resources

        owners: dict[str, tuple[Path, str]] = {}
        builtin = Path(str(resources.files("archzoo.zoo")))
        dirs = [(builtin, "builtins")] + [(d, self._zoo_dir_plugin(d)) for d in self.zoo_dirs]
        for d, plugin in dirs:
            for p in sorted(d.glob("*.yaml")):
                owners.setdefault(p.stem, (p, plugin))
        return owners

    def _zoo_dir_plugin(self, d: Path) -> str:
        return next((n for n, i in self.plugins.items() if str(d) in i.zoo_dirs), "?")

    def _check_zoo_names(self, registrar: Registrar) -> None:
        """A plugin's zoo spec names must be new and printable; the error names both owners."""
        owners = self.zoo_owners()
        for d in registrar.zoo_dirs:
            for p in sorted(d.glob("*.yaml")):
                if not p.stem.isprintable():
                    raise RegistryError(f"zoo spec file name {p.name!r} has control characters")
                if p.stem in owners:
                    path, other = owners[p.stem]
                    raise RegistryError(
                        f"zoo model {p.stem!r} of plugin {registrar.plugin!r} ({p}) is also "
                        f"provided by plugin {other!r} ({path}); kept {other!r}'s"
                    )
                owners[p.stem] = (p, registrar.plugin)

    def _load_entry_points(self) -> None:
        disabled = {s.strip() for s in os.environ.get(DISABLE_ENV, "").split(",") if s.strip()}
        off = plugins_off()  # every third-party plugin; the built-ins are already in
        eps = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
        for ep in sorted(eps, key=lambda e: (e.name, e.value)):  # the same order everywhere
            dist = getattr(ep, "dist", None)
            dist_name = dist.metadata["Name"] if dist is not None else None
            version = dist.version if dist is not None else None
            not_loaded = functools.partial(PluginInfo, ep.name, dist_name, version)
            if ep.name in self.plugins:  # a second plugin of that name: reported, not loaded
                kept = self.plugins[ep.name]
                self.plugins[f"{ep.name} ({dist_name})"] = not_loaded(
                    status="failed",
                    error=f"plugin name {ep.name!r} is also used by "
                    f"{kept.distribution or ep.name!r}; kept that one",
                )
                continue
            if ep.name in disabled or off:
                why = f"{NO_PLUGINS_ENV}=1 (zoo --no-plugins)" if off else DISABLE_ENV
                self.plugins[ep.name] = not_loaded(status="disabled", error=f"disabled by {why}")
                continue
            with loading_plugin(ep.name, ep.value):  # its prints to stderr; named if slow
                try:
                    obj = ep.load()
                except (Exception, SystemExit) as exc:  # noqa: BLE001 - sys.exit() at import too
                    why = f"import of {ep.value!r} failed: {type(exc).__name__}: {exc}"
                    self.plugins[ep.name] = not_loaded(status="failed", error=why)
                    continue
                self.register_plugin(obj, ep.name, distribution=dist_name, version=version)

    def get(self, kind: str, name: str) -> type[Component]:
        """The component class registered as (kind, name); a clear error otherwise."""
        if kind not in KINDS:
            raise RegistryError(f"unknown component kind {kind!r}; expected one of {list(KINDS)}")
        try:
            return self._components[(kind, name)][0]
        except KeyError:
            raise RegistryError(self.unknown_message(kind, name)) from None

    def converter(self, model_type: str) -> Any:
        """The converter for an HF model_type; the error lists the supported ones."""
        if model_type not in self._converters:
            from .converter import ConversionError

            lacks = self._missing.get(model_type)
            why = f" (it needs {lacks[0]}, which archzoo lacks)" if lacks else ""
            raise ConversionError(
                f"unsupported model_type {model_type!r}{why}; supported: "
                f"{', '.join(sorted(self._converters)) or 'none'}"
            )
        return self._converters[model_type][0]

    def missing_mechanism(self, model_type: str) -> str:
        """The mechanism an unsupported type needs that archzoo lacks, or 'not examined'."""
        return self._missing.get(model_type, ("not examined", ""))[0]

    def converter_plugin(self, model_type: str) -> str:
        """The plugin that registered the converter of `model_type`."""
        return self._converters[model_type][1]

    def model_types(self) -> list[str]:
        return sorted(self._converters)

    def has(self, kind: str, name: str) -> bool:
        return (kind, name) in self._components

    def plugin_of(self, kind: str, name: str) -> str:
        return self._components[(kind, name)][1]

    def names(self, kind: str) -> list[str]:
        return sorted(n for k, n in self._components if k == kind)

    def components(self, kind: str | None = None) -> list[type[Component]]:
        """Registered component classes, sorted by kind then name."""
        items = [c for (k, _), (c, _) in self._components.items() if kind is None or k == kind]
        return sorted(items, key=lambda c: (KINDS.index(c.kind), c.name))

    def unknown(self, kind: str, name: str) -> UnknownComponent:
        """What the registry can say about a (kind, name) it does not hold."""
        names = self.names(kind)
        return UnknownComponent(
            kind=kind,
            name=name,
            known=names,
            close=difflib.get_close_matches(str(name), names, n=3, cutoff=0.6),
            not_loaded=[f"{p.name} ({p.error})" for p in self.plugins.values() if p.status != "ok"],
        )

    def unknown_message(self, kind: str, name: str) -> str:
        return self.unknown(kind, name).message()


_REGISTRY: Registry | None = None


def get_registry() -> Registry:
    """The process-wide registry, created (and entry points loaded) on first use."""
    global _REGISTRY
    if _REGISTRY is None:
        _REGISTRY = Registry()
    return _REGISTRY


def reset_registry() -> None:
    """Forget the process-wide registry so the next use reloads plugins."""
    global _REGISTRY
    _REGISTRY = None
