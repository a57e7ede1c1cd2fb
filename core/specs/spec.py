"""Spec loading: read a source, apply overrides, resolve every default, validate the plan.

Where the raw data comes from (zoo names, files, `extends:`, `--set`) is in sources.py;
the keys and their defaults in fields.py; the resolution of every default in resolver.py;
the build plan that validation checks and the builder assembles in plan.py; the cross-field
checks in checks.py.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import yaml

from ..errors import SpecError, SpecIssue
from ..parts.registry import Registry, get_registry
from .fields import DERIVED
from .plan import (  # noqa: F401 - component_config, stack_dims: re-exported for callers
    BuildPlan,
    component_config,
    layer_components,
    stack_config,
    stack_dims,
    stack_roles,
)
from .resolver import resolve_data
from .sources import (  # noqa: F401 - list_models, find_model, parse_override: public
    apply_overrides,
    find_model,
    list_models,
    load_with_extends,
    parse_override,
)
from .yaml_source import Locs


class Spec:
    """A resolved, validated spec: plain data with every default and derived size explicit.

    `derived` names the keys resolution computed (head_dim from d_model / n_heads, ...):
    loading the spec again with overrides recomputes them. `plan` is the build plan that
    validation checked; the builder assembles from it without validating again.
    """

    def __init__(
        self,
        data: dict[str, Any],
        locs: Locs | None = None,
        *,
        derived: tuple[str, ...] = (),
        plan: BuildPlan | None = None,
    ) -> None:
        self.data = data
        self.locs = locs or {}
        self.derived = derived
        self.plan = plan
        self.attention_impl: str | None = None  # a kernel an old spec key chose (deprecated)

    @property
    def name(self) -> str:
        return self.data["name"]

    @property
    def family(self) -> str:
        return self.data["family"]

    def to_dict(self) -> dict[str, Any]:
        return copy.deepcopy(self.data)

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.data, sort_keys=False, default_flow_style=None)

    def source_data(self) -> dict[str, Any]:
        """The data with derived keys back to null: what to resolve again after overrides."""
        return underive(self.to_dict(), self.derived)

    def stacks(self) -> list[str]:
        """The stacks this model has, in forward order."""
        return [role.which for role in stack_roles(self.family)]

    def stack(self, which: str) -> dict[str, Any]:
        """The effective config of one stack: top-level keys with its section on top."""
        return stack_config(self.data, which)

    def layer_components(self, which: str) -> list[dict[str, dict[str, Any]]]:
        """For each layer of a stack, its attention/ffn/block/norm configs."""
        return layer_components(self.stack(which))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Spec) and other.data == self.data

    def __repr__(self) -> str:
        return f"Spec(name={self.name!r}, family={self.family!r})"


def underive(data: dict[str, Any], derived: Any) -> dict[str, Any]:
    """Put the derived keys (dotted: 'd_ff', 'decoder.head_dim') of spec data back to null."""
    for key in derived:
        *section, last = str(key).split(".")
        if section and isinstance(data.get(section[0]), dict):
            data[section[0]].pop(last, None)
        elif not section and last in DERIVED:
            data[last] = None
    return data


def resolve(data: dict, locs: Locs | None = None, registry: Registry | None = None) -> Spec:
    """Validate raw spec data and return the resolved Spec; raises SpecError with every issue."""
    locs = locs or {}
    out, derived, plan, kernel = resolve_data(data, locs, registry or get_registry())
    spec = Spec(out, locs, derived=derived, plan=plan)
    spec.attention_impl = kernel  # an old spec key's kernel choice (deprecated)
    return spec


# ---------------------------------------------------------------- entry point


def load_spec(
    source: Any,
    overrides: Mapping[str, Any] | None = None,
    *,
    registry: Registry | None = None,
) -> Spec:
    """Load a spec from a zoo name, a path, a dict, YAML text or a Spec; apply overrides."""
    if isinstance(source, Spec):
        data, locs = source.source_data(), dict(source.locs)
    else:
        data, locs = load_with_extends(source, registry=registry)
    apply_overrides(data, locs, overrides)
    return resolve(data, locs, registry)


def load_stored_spec(
    data: Any,
    overrides: Mapping[str, Any] | None = None,
    *,
    registry: Registry | None = None,
) -> Spec:
    """A spec stored inside a file (a weights file's metadata) as data only: resolved
    without reading anything else. A string (a zoo name, a path, YAML text: each would be
    read) and `extends` (saved specs are resolved) are refused."""
    if not isinstance(data, dict):
        text = repr(data)
        shown = text if len(text) <= 60 else text[:57] + "..."
        msg = (
            f"cannot load a spec from {type(data).__name__} {shown}: a stored spec is a "
            "mapping of spec keys (data, never a name, path or YAML text to read)"
        )
        raise SpecError([SpecIssue("", msg)])
    if data.get("extends") is not None:
        msg = (
            f"the stored spec names extends={data['extends']!r}; saved specs are resolved "
            "(a file's spec never reads another)"
        )
        raise SpecError([SpecIssue("extends", msg)])
    return load_spec(data, overrides, registry=registry)
