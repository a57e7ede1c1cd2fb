"""The build plan: each stack's sizes, roles and typed component configs, made once per spec.

Validation checks the plan and the builder assembles from it, so neither goes back to the
spec's raw mappings. Which stack is causal and which cross-attends is decided here only.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from torch import nn

from ..parts.component import Component
from ..parts.interfaces import Dims
from ..parts.kinds import STACKS
from ..parts.registry import Registry
from .mup import mup_dims

LAYER_PARTS = ("attention", "ffn", "block", "norm")
LAYER_OVERRIDES = (*LAYER_PARTS, "position")  # a layer may also rotate/bias by its own position


@dataclass(frozen=True)
class StackRole:
    """One stack of a family: its name, whether it is causal, whether it cross-attends."""

    which: str
    causal: bool
    cross: bool


_ROLES: dict[str, tuple[StackRole, ...]] = {
    "encoder": (StackRole("encoder", causal=False, cross=False),),
    "decoder": (StackRole("decoder", causal=True, cross=False),),
    "encoder-decoder": (
        StackRole("encoder", causal=False, cross=False),
        StackRole("decoder", causal=True, cross=True),
    ),
}


def stack_roles(family: str) -> tuple[StackRole, ...]:
    """The stacks of a model family in forward order, with their causal / cross flags."""
    return _ROLES[family]


def stack_role(family: str, which: str) -> StackRole:
    """The role of stack `which` in a `family` model."""
    for role in stack_roles(family):
        if role.which == which:
            return role
    raise ValueError(f"a {family} model has no {which} stack")


def select_layers(select: Any, n_layers: int) -> list[int]:
    """Layer indices of a `select:` value: a list of ints, 'start:stop:step', or 'all'."""
    if select == "all":
        return list(range(n_layers))
    if isinstance(select, bool) or (
        isinstance(select, list) and any(isinstance(i, bool) for i in select)
    ):
        raise ValueError("true/false is not a layer index")
    if isinstance(select, int):
        return [select]
    if isinstance(select, list):
        if not all(isinstance(i, int) for i in select):
            raise ValueError(f"layer indices must be integers, got {select!r}")
        return list(select)
    if not isinstance(select, str) or not select.strip():
        raise ValueError(f"got {select!r}")
    if ":" not in select:  # '3' would select layer 3 by accident of quoting, or 'al' nothing
        raise ValueError(f"{select!r} is a string but not 'all' or a 'start:stop:step' slice")
    parts = select.split(":")
    if len(parts) > 3:
        raise ValueError(f"bad layer slice {select!r}")
    nums = [int(p) if p.strip() else None for p in parts]
    return list(range(n_layers))[slice(*nums)]


@dataclass(frozen=True)
class Part:
    """One component to build: its class, its typed config and its resolved spec mapping."""

    kind: str
    cls: type[Component]
    config: Any
    spec: dict[str, Any]
    plugin: str = "?"  # the plugin that registered `cls`, for error messages

    def make(self, dims: Dims, **parts: Any) -> nn.Module:
        """An instance of the component for `dims`, with the sub-parts the builder hands over."""
        return self.cls(self.config, dims, **parts)


@dataclass(frozen=True)
class LayerPlan:
    """The attention, ffn, block and norm of one layer, and its own position (None: the
    stack's)."""

    attention: Part
    ffn: Part
    block: Part
    norm: Part
    position: Part | None = None

    def components(self) -> dict[str, dict[str, Any]]:
        """The resolved spec mappings of the layer's parts, by kind."""
        out = {kind: getattr(self, kind).spec for kind in LAYER_PARTS}
        if self.position is not None:
            out["position"] = self.position.spec
        return out


@dataclass
class StackPlan:
    """Everything the builder needs for one stack."""

    role: StackRole
    config: dict[str, Any]  # effective keys: the top level with the stack's section on top
    dims: Dims
    position_dims: Dims  # d_model is the embedding's `position_width`
    embedding: Part
    position: Part
    sharing: Part
    norm: Part  # the stack-level norm (embedding norm, final norm)
    layers: list[LayerPlan]
    layer_map: list[int]  # layer i uses parameter set layer_map[i]
    sharing_error: str | None = None  # why the sharing component refused n_layers


@dataclass
class BuildPlan:
    """The stacks in forward order, the head, and the registry the classes came from."""

    family: str
    stacks: list[StackPlan]
    head: Part
    registry: Registry

    def stack(self, which: str) -> StackPlan:
        """The plan of stack `which`."""
        for s in self.stacks:
            if s.role.which == which:
                return s
        raise ValueError(f"a {self.family} model has no {which} stack")


def stack_config(data: dict[str, Any], which: str) -> dict[str, Any]:
    """The effective config of one stack: top-level keys with its section on top."""
    out = {k: v for k, v in data.items() if k not in STACKS}
    if data["family"] == "encoder-decoder":
        out.update(data.get(which) or {})
    return out


def stack_dims(cfg: dict[str, Any]) -> Dims:
    """Dims of one stack's effective (resolved) config."""
    names = [f.name for f in dataclasses.fields(Dims) if f.name in cfg]
    return Dims(**{n: cfg[n] for n in names}, **mup_dims(cfg))


def component_config(reg: Registry, kind: str, comp: dict[str, Any]) -> Any:
    """The typed config dataclass of a resolved component mapping."""
    return part(reg, kind, comp).config


def part(reg: Registry, kind: str, comp: dict[str, Any]) -> Part:
    """A Part from a resolved component mapping {kind: name, params...}."""
    cls = reg.get(kind, comp["kind"])
    config = cls.Config(**{k: v for k, v in comp.items() if k != "kind"})
    return Part(kind, cls, config, comp, reg.plugin_of(kind, cls.name))


def layer_components(cfg: dict[str, Any]) -> list[dict[str, dict[str, Any]]]:
    """For each layer of a stack config, its attention/ffn/block/norm/position mappings."""
    base, changed = _layer_overrides(cfg)
    return [dict(changed.get(i, base)) for i in range(cfg["n_layers"])]


def layer_plans(cfg: dict[str, Any], reg: Registry) -> list[LayerPlan]:
    """The plan of each layer; layers without a `layers:` override share one LayerPlan."""
    base, changed = _layer_overrides(cfg)

    def plan(comps: dict[str, dict[str, Any]]) -> LayerPlan:
        own = comps["position"] != cfg["position"]
        position = part(reg, "position", comps["position"]) if own else None
        return LayerPlan(**{k: part(reg, k, comps[k]) for k in LAYER_PARTS}, position=position)

    common = plan(base)
    return [plan(changed[i]) if i in changed else common for i in range(cfg["n_layers"])]


def _layer_overrides(cfg: dict[str, Any]) -> tuple[dict, dict[int, dict]]:
    """The stack's layer components, and those of each layer a `layers:` entry changes."""
    base = {k: cfg[k] for k in LAYER_OVERRIDES}
    changed: dict[int, dict] = {}
    for entry in cfg.get("layers") or []:
        for i in select_layers(entry["select"], cfg["n_layers"]):
            changed.setdefault(i, dict(base)).update(
                {k: v for k, v in entry.items() if k != "select"}
            )
    return base, changed


def make_stack(data: dict[str, Any], role: StackRole, reg: Registry) -> StackPlan:
    """The plan of one stack of a resolved spec."""
    cfg = stack_config(data, role.which)
    dims = stack_dims(cfg)
    embedding = part(reg, "embedding", cfg["embedding"])
    width = embedding.cls.position_width(embedding.config, dims)
    pos_dims = dims if width == dims.d_model else dataclasses.replace(dims, d_model=width)
    layers = layer_plans(cfg, reg)
    sharing = part(reg, "sharing", cfg["sharing"])
    error = None
    try:
        layer_map = sharing.make(dims).assign(cfg["n_layers"])
    except ValueError as exc:
        layer_map, error = list(range(cfg["n_layers"])), str(exc)
    return StackPlan(
        role=role,
        config=cfg,
        dims=dims,
        position_dims=pos_dims,
        embedding=embedding,
        position=part(reg, "position", cfg["position"]),
        sharing=sharing,
        norm=part(reg, "norm", cfg["norm"]),
        layers=layers,
        layer_map=layer_map,
        sharing_error=error,
    )


def make_plan(data: dict[str, Any], reg: Registry) -> BuildPlan:
    """The build plan of resolved spec data (every component known, every size explicit)."""
    family = data["family"]
    stacks = [make_stack(data, role, reg) for role in stack_roles(family)]
    return BuildPlan(family, stacks, part(reg, "head", data["head"]), reg)
