"""Component registry on pluggy: built-ins and entry points go through one hook."""

from __future__ import annotations

import difflib
import functools
import importlib
import importlib.metadata
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pluggy

from .component import KINDS, Component
from .hooks import PROJECT, ArchzooSpec
from .kernels import AttentionKernel
from .mixer_kernels import AUTO, TORCH, MixerKernel
from .plugin_guard import DISABLE_ENV, NO_PLUGINS_ENV, loading_plugin, plugins_off
from .registrar import Registrar, RegistryError
from .tensor_source import ConversionError

ENTRY_POINT_GROUP = "archzoo"


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


class Registry:
    """Maps (kind, name) to component classes, and remembers every plugin's outcome."""

    def __init__(self, *, load_entry_points: bool = True) -> None:
        self.pm = pluggy.PluginManager(PROJECT)
        self.pm.add_hookspecs(ArchzooSpec)
        self._components: dict[tuple[str, str], tuple[type[Component], str]] = {}
        self._converters: dict[str, tuple[Any, str]] = {}
        self._missing: dict[str, tuple[str, str]] = {}  # model_type -> (mechanism, plugin)
        self._kernels: dict[str, tuple[AttentionKernel, str]] = {}  # name -> (kernel, plugin)
        self._mixer_kernels: dict[str, tuple[MixerKernel, str]] = {}
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
        info.components += [f"kernel:{k.name}" for k in registrar.kernels]
        info.components += [f"mixer_kernel:{k.name}" for k in registrar.mixer_kernels]
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
        self._kernels = {k: v for k, v in self._kernels.items() if v[1] != name}
        self._mixer_kernels = {k: v for k, v in self._mixer_kernels.items() if v[1] != name}
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
        names: set[str] = set()
        for kernel in registrar.kernels:
            if kernel.name in self._kernels or kernel.name in names:
                other = self._kernels.get(kernel.name, (None, registrar.plugin))[1]
                raise RegistryError(
                    f"duplicate attention kernel {kernel.name!r}: registered by plugin "
                    f"{other!r} and again by plugin {registrar.plugin!r}; kept {other!r}'s"
                )
            names.add(kernel.name)
        names = set()
        for mixer in registrar.mixer_kernels:
            if mixer.name in self._mixer_kernels or mixer.name in names:
                other = self._mixer_kernels.get(mixer.name, (None, registrar.plugin))[1]
                raise RegistryError(
                    f"duplicate mixer kernel {mixer.name!r}: registered by plugin "
                    f"{other!r} and again by plugin {registrar.plugin!r}; kept {other!r}'s"
                )
            names.add(mixer.name)
        for cls in registrar.components:
            self._components[(cls.kind, cls.name)] = (cls, registrar.plugin)
        for conv in registrar.converters:
            self._converters[conv.model_type] = (conv, registrar.plugin)
        self._missing.update({t: (m, registrar.plugin) for t, m in registrar.missing.items()})
        self._kernels.update({k.name: (k, registrar.plugin) for k in registrar.kernels})
        self._mixer_kernels.update({k.name: (k, registrar.plugin) for k in registrar.mixer_kernels})
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

    def kernel(self, name: str) -> AttentionKernel:
        """The attention kernel registered as `name`; a clear error naming the others."""
        try:
            return self._kernels[name][0]
        except KeyError:
            known = ", ".join(sorted(self._kernels))
            raise RegistryError(
                f"unknown attention kernel {name!r}; registered kernels: {known}"
            ) from None

    def kernels(self) -> list[AttentionKernel]:
        """Every registered attention kernel, by name."""
        return [self._kernels[n][0] for n in sorted(self._kernels)]

    def kernel_plugin(self, name: str) -> str:
        return self._kernels[name][1]

    def mixer_kernels(self) -> list[MixerKernel]:
        """Every registered optional mixer kernel, by name."""
        return [self._mixer_kernels[n][0] for n in sorted(self._mixer_kernels)]

    def converter(self, model_type: str) -> Any:
        """The converter for an HF model_type; the error lists the supported ones."""
        if model_type not in self._converters:
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


def check_attention_impl(name: Any, registry: Registry | None = None) -> str:
    """`name` when it names a registered attention kernel; a clear error otherwise."""
    reg = registry or get_registry()
    if not isinstance(name, str):
        raise TypeError(f"attention_impl must be a kernel name (a str), got {name!r}")
    reg.kernel(name)
    return name


def check_mixer_impl(name: Any, registry: Registry | None = None) -> str:
    """`name` when it is "auto", "torch" or a registered mixer kernel; a clear error otherwise."""
    reg = registry or get_registry()
    known = [AUTO, TORCH, *(k.name for k in reg.mixer_kernels())]
    if not isinstance(name, str) or name not in known:
        raise RegistryError(f"unknown mixer_impl {name!r}; choose one of: {', '.join(known)}")
    return name


def list_mixer_impls() -> list[str]:
    """The values of `mixer_impl`: "auto", "torch" and each registered mixer kernel."""
    return [AUTO, TORCH, *(k.name for k in get_registry().mixer_kernels())]


def list_attention_impls() -> list[str]:
    """The names of the registered attention kernels (for `attention_impl=`, `--attn-impl`)."""
    return [k.name for k in get_registry().kernels()]
