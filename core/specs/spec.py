"""Spec loading: read a source, apply overrides, resolve every default, validate the plan.

Where the raw data comes from (zoo names, files, `extends:`, `--set`) is in spec_sources.py;
the keys and their defaults in spec_fields.py; the build plan that validation checks and the
builder assembles in plan.py; the cross-field checks in spec_checks.py.
"""

from __future__ import annotations

import copy
import dataclasses
import typing
from collections.abc import Mapping
from typing import Any

import yaml

from ..errors import SpecError, SpecIssue, closest, dotted
from ..parts.component import check_value, read_number
from ..parts.registry import Registry, get_registry
from .checks import check_plan
from .fields import (
    COMPONENT_DEFAULTS,
    COMPONENT_KEYS,
    LAYER_KEYS,
    REQUIRED,
    STACK_KEYS,
    STACKS,
    ModelFields,
    MupFields,
)
from .plan import (  # noqa: F401 - component_config, stack_dims: re-exported for callers
    BuildPlan,
    component_config,
    layer_components,
    make_plan,
    select_layers,
    stack_config,
    stack_dims,
    stack_roles,
)
from .sources import (  # noqa: F401 - list_models, find_model, parse_override: public
    apply_overrides,
    as_component,
    find_model,
    list_models,
    load_with_extends,
    merge_component,
    parse_override,
)
from .yaml_source import Locs

DERIVED = ("head_dim", "d_ff", "attention_dropout")  # null in a source: computed from others


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


# ---------------------------------------------------------------- resolution


class _Resolver:
    def __init__(self, locs: Locs, registry: Registry) -> None:
        self.locs = locs
        self.registry = registry
        self.issues: list[SpecIssue] = []

    def issue(self, path: tuple, message: str, suggestion: str | None = None) -> None:
        loc = None
        for n in range(len(path), -1, -1):
            loc = self.locs.get(path[:n])
            if loc is not None:
                break
        self.issues.append(SpecIssue(dotted(path), message, loc, suggestion))

    def issue_at_user_key(self, paths: list[tuple], message: str) -> None:
        """An issue about several keys, reported at the first one the user wrote (their spec
        file or an override) rather than one inherited from an `extends:` base."""
        top = self.locs.get(())

        def rank(path: tuple) -> int:  # 0: an override, 1: the spec named, 2: a base
            loc = self.locs.get(path)
            if loc is None:
                return 3
            if loc.file.startswith("<override"):
                return 0
            return 1 if top is not None and loc.file == top.file else 2

        self.issue(min(paths, key=rank), message)  # min keeps the first of equal rank

    def fields(self, data: dict, path: tuple, allowed: tuple[str, ...] | None) -> dict:
        """Check and fill the scalar model keys (all of them, or only `allowed`)."""
        hints = typing.get_type_hints(ModelFields)
        out = {}
        for f in dataclasses.fields(ModelFields):
            if allowed is not None and f.name not in allowed:
                continue
            if f.name not in data:
                if allowed is None:
                    if f.name in REQUIRED:
                        self.issue(path + (f.name,), "is required")
                    out[f.name] = f.default
                continue
            value = read_number(data[f.name], hints[f.name])
            if f.name in REQUIRED and value is None:
                self.issue(path + (f.name,), "is required")
            err = check_value(value, hints[f.name], dict(f.metadata))
            if err:
                self.issue(path + (f.name,), err, _choice_hint(value, hints[f.name], f))
            out[f.name] = value
        return out

    def mup(self, value: Any) -> dict | None:
        """Check `mup:` (null, or a mapping of MupFields keys with base_width set)."""
        if value is None:
            return None
        if not isinstance(value, dict):
            self.issue(("mup",), f"must be null or a mapping {{base_width: N}}, got {value!r}")
            return None
        hints = typing.get_type_hints(MupFields)
        fields = {f.name: f for f in dataclasses.fields(MupFields)}
        for key in value:
            if key not in fields:
                self.issue(
                    ("mup", key),
                    f"unknown key of mup; known: {', '.join(fields)}",
                    closest(key, fields),
                )
        out = {}
        for name, f in fields.items():
            v = value.get(name, f.default)
            err = check_value(v, hints[name], dict(f.metadata))
            if err:
                self.issue(("mup", name), err)
            elif v is None:
                self.issue(("mup", name), "is required when mup is set")
            out[name] = v
        return out

    def component(self, kind: str, value: Any, path: tuple) -> dict | None:
        """Resolve one component value to {kind: name, every param explicit}."""
        value = as_component(value)
        if not isinstance(value, dict):
            self.issue(path, f"must be a {kind} name or a mapping with 'kind:', got {value!r}")
            return None
        name = value.get("kind")
        if not isinstance(name, str):
            self.issue(path + ("kind",), f"must name a {kind} component, got {name!r}")
            return None
        if not self.registry.has(kind, name):
            unknown = self.registry.unknown(kind, name)
            self.issue(path + ("kind",), unknown.message(suggest=False), unknown.closest)
            return None
        cls = self.registry.get(kind, name)
        hints = typing.get_type_hints(cls.Config)
        fields = {f.name: f for f in dataclasses.fields(cls.Config)}
        out: dict[str, Any] = {"kind": name}
        for key in value:
            if key != "kind" and key not in fields:
                self.issue(
                    path + (key,),
                    f"unknown parameter of {kind} {name!r}; known: {', '.join(fields) or 'none'}",
                    closest(key, fields),
                )
        for fname, f in fields.items():
            if fname in value:
                given = read_number(value[fname], hints[fname])
                err = check_value(given, hints[fname], dict(f.metadata))
                if err:
                    self.issue(path + (fname,), err, _choice_hint(given, hints[fname], f))
                out[fname] = given
            else:
                out[fname] = (
                    f.default if f.default is not dataclasses.MISSING else f.default_factory()
                )
        return out

    def components(self, data: dict, base: dict | None, path: tuple, keys: tuple[str, ...]) -> dict:
        out = {}
        for key in keys:
            if key in data:
                merged = (
                    merge_component(base[key], data[key]) if base and base.get(key) else data[key]
                )
                if base is None and isinstance(merged, dict) and "kind" not in merged:
                    merged = {"kind": COMPONENT_DEFAULTS[key], **merged}  # `--set norm.eps=...`
                resolved = self.component(key, merged, path + (key,))
            elif base is not None:
                resolved = base.get(key)
            else:
                resolved = self.component(key, COMPONENT_DEFAULTS[key], path + (key,))
            out[key] = resolved
        return out

    def layers(self, value: Any, stack: dict, path: tuple) -> list[dict]:
        if value is None:
            return []
        if not isinstance(value, list):
            self.issue(path, "must be a list of per-layer overrides")
            return []
        out = []
        for i, entry in enumerate(value):
            p = path + (i,)
            if not isinstance(entry, dict) or "select" not in entry:
                self.issue(p, "each entry must be a mapping with 'select:' and components")
                continue
            for key in entry:
                if key not in LAYER_KEYS:
                    self.issue(
                        p + (key,),
                        f"not a per-layer key; allowed: {', '.join(LAYER_KEYS)}",
                        closest(key, LAYER_KEYS),
                    )
            try:
                n = stack.get("n_layers") or 0
                idx = select_layers(entry["select"], n if isinstance(n, int) else 0)
                bad = [j for j in idx if not isinstance(j, int) or not 0 <= j < n]
                if bad:
                    self.issue(p + ("select",), f"layer indices {bad} outside 0..{n - 1}")
                elif not idx:
                    self.issue(p + ("select",), f"selects no layer (there are {n})")
            except (ValueError, TypeError) as exc:
                self.issue(
                    p + ("select",),
                    f"{exc}; expected a list of layer indices, 'start:stop:step' or 'all'",
                )
            keys = tuple(k for k in LAYER_KEYS if k in entry and k != "select")
            resolved = {"select": entry["select"]}
            resolved.update(self.components(entry, stack, p, keys))
            out.append(resolved)
        return out


def _choice_hint(value: Any, tp: Any, f: dataclasses.Field) -> str | None:
    """The closest allowed choice to a misspelt string (Literal types, `choices=`)."""
    options = list(f.metadata.get("choices", ()))
    for t in (tp, *typing.get_args(tp)):
        if typing.get_origin(t) is typing.Literal:
            options += typing.get_args(t)
    return closest(value, [o for o in options if isinstance(o, str)])


def resolve(data: dict, locs: Locs | None = None, registry: Registry | None = None) -> Spec:
    """Validate raw spec data and return the resolved Spec; raises SpecError with every issue."""
    reg = registry or get_registry()
    r = _Resolver(locs or {}, reg)
    allowed_top = {f.name for f in dataclasses.fields(ModelFields)} | set(COMPONENT_KEYS)
    allowed_top |= {"layers", *STACKS}
    for key in data:
        if key not in allowed_top:
            r.issue((key,), "unknown key", closest(key, sorted(allowed_top)))
    out = r.fields(data, (), None)
    out["mup"] = r.mup(out["mup"])
    out.pop("extends", None)
    out["extends"] = None
    out.update(r.components(data, None, (), COMPONENT_KEYS))
    out["layers"] = r.layers(data.get("layers"), out, ("layers",))
    family = out.get("family")
    for which in STACKS:
        if which not in data:
            if family == "encoder-decoder":
                out[which] = {}
            continue
        section = data[which]
        if family != "encoder-decoder":
            r.issue((which,), f"the '{which}:' section is only for encoder-decoder models")
            continue
        if not isinstance(section, dict):
            r.issue((which,), "must be a mapping of per-stack overrides")
            continue
        for key in section:
            if key not in STACK_KEYS:
                r.issue(
                    (which, key),
                    f"cannot be set per stack; allowed: {', '.join(STACK_KEYS)}",
                    closest(key, STACK_KEYS),
                )
        sec = r.fields(section, (which,), STACK_KEYS)
        comps = tuple(k for k in COMPONENT_KEYS if k in section and k != "head")
        sec.update(r.components(section, out, (which,), comps))
        if "layers" in section:
            merged = {**out, **sec}
            sec["layers"] = r.layers(section["layers"], merged, (which, "layers"))
        out[which] = sec
    if not r.issues:
        derived = _derive(out, r)
        if not r.issues:
            out = _ordered(out)
            plan = make_plan(out, reg)
            check_plan(plan, out, r.issue)
            if not r.issues:
                return Spec(out, r.locs, derived=derived, plan=plan)
    raise SpecError(sorted(dict.fromkeys(r.issues), key=_issue_order))  # once per issue


def _derived_value(key: str, cfg: dict) -> Any:
    """The value a null derived key takes in an effective stack config (None: cannot)."""
    if key == "head_dim":
        return None if cfg["d_model"] % cfg["n_heads"] else cfg["d_model"] // cfg["n_heads"]
    if key == "d_ff":
        return 4 * cfg["d_model"]
    return cfg["dropout"]  # attention_dropout


def _derive(out: dict, r: _Resolver) -> tuple[str, ...]:
    """Fill null derived keys with numbers, at the top and in encoder:/decoder: sections
    where a stack's value differs from the top's; returns the dotted keys filled."""
    top = {k: v for k, v in out.items() if k not in STACKS}  # before filling
    filled = []
    for key in DERIVED:
        if out[key] is None:
            out[key] = _derived_value(key, top)
            filled.append(key)
    if out["family"] != "encoder-decoder":
        if out["head_dim"] is None:
            r.issue_at_user_key([("n_heads",), ("d_model",)], _indivisible(top))
        return tuple(filled)
    for which in STACKS:
        section = out[which]
        cfg = {**top, **section}
        for key in DERIVED:
            value = cfg[key]
            if value is None:
                value = _derived_value(key, cfg)
                if value is None:
                    paths = [(which, "n_heads"), (which, "d_model"), ("n_heads",), ("d_model",)]
                    r.issue_at_user_key(paths, _indivisible(cfg))
                    continue
                if key in section or value != out[key]:
                    filled.append(f"{which}.{key}")
            if key in section or value != out[key]:
                section[key] = value
        out[which] = {k: section[k] for k in STACK_KEYS if k in section}
    return tuple(filled)


def _indivisible(cfg: dict) -> str:
    return (
        f"d_model {cfg['d_model']} is not divisible by "
        f"n_heads {cfg['n_heads']} (set head_dim to decouple them)"
    )


def _issue_order(issue: SpecIssue) -> tuple:
    loc = issue.location
    return (0, loc.file, loc.line, loc.col) if loc else (1, "", 0, 0)


def _ordered(out: dict) -> dict:
    order = [f.name for f in dataclasses.fields(ModelFields)] + list(COMPONENT_KEYS)
    order += ["layers", *STACKS]
    return {k: out[k] for k in order if k in out}


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
