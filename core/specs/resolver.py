"""Spec resolution: raw spec data -> every default and derived size explicit, validated.

Each problem becomes a SpecIssue at the place the user wrote it; the whole list is raised
at once as a SpecError. `archzoo.specs.spec.resolve` wraps the result in a `Spec`.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

from ..errors import SpecError, SpecIssue, closest, dotted
from ..parts.compat import DEPRECATED_KEYS, deprecated_choice, renamed_options
from ..parts.component import check_value, read_number
from ..parts.kinds import STACKS
from ..parts.registry import Registry
from .checks import check_plan
from .fields import (
    COMPONENT_DEFAULTS,
    COMPONENT_KEYS,
    DERIVED,
    LAYER_KEYS,
    REQUIRED,
    STACK_KEYS,
    ModelFields,
    MupFields,
)
from .plan import BuildPlan, make_plan, select_layers
from .sources import as_component, merge_component
from .yaml_source import Locs


class _Resolver:
    def __init__(self, locs: Locs, registry: Registry) -> None:
        self.locs = locs
        self.registry = registry
        self.issues: list[SpecIssue] = []
        self.attention_impl: str | None = None  # chosen by a deprecated spec key

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
        old = {k: value[k] for k in DEPRECATED_KEYS if k in value and k not in fields}
        if old:  # a kernel chosen in the spec: now the model's run-time choice
            where = ".".join(str(p) for p in path)
            choice, problems = deprecated_choice(old, where)
            for key, problem in problems:
                self.issue(path + (key,), problem)
            self.attention_impl = choice or self.attention_impl
            value = {k: v for k, v in value.items() if k not in old}
        value, problems = renamed_options(value, fields, ".".join(str(p) for p in path))
        for key, problem in problems:
            self.issue(path + (key,), problem)
        for key in value:
            if key != "kind" and key not in fields:
                self.issue(
                    path + (key,),
                    f"unknown parameter of {kind} {name!r}; known: {', '.join(fields) or 'none'}",
                    closest(key, fields),
                )
        for fname, f in fields.items():
            if f.metadata.get("components") and (fname in value or hints[fname] is dict):
                # components: a list, or one mapping (resolved when left out, too)
                given = value[fname] if fname in value else f.default_factory()
                if hints[fname] is dict:
                    out[fname] = self.component(f.metadata["components"], given, path + (fname,))
                else:
                    out[fname] = self.nested(f.metadata["components"], given, path + (fname,))
            elif fname in value:
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

    def nested(self, kind: str, value: Any, path: tuple) -> list[Any]:
        """A parameter holding components of `kind` (a list), each resolved as a spec's own."""
        if not isinstance(value, list):
            self.issue(path, f"must be a list of {kind} components, got {value!r}")
            return []
        return [self.component(kind, v, path + (i,)) for i, v in enumerate(value)]

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


def resolve_data(
    data: dict, locs: Locs, registry: Registry
) -> tuple[dict[str, Any], tuple[str, ...], BuildPlan, str | None]:
    """Validate raw spec data: (the resolved data, the derived keys filled, the build plan,
    the kernel an old spec key chose);
    raises SpecError with every issue."""
    r = _Resolver(locs, registry)
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
            plan = make_plan(out, registry)
            check_plan(plan, out, r.issue)
            if not r.issues:
                return out, derived, plan, r.attention_impl
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
