"""Where spec data comes from: zoo names, paths, dicts or YAML text, `extends`, overrides."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import Location, SpecError, SpecIssue, closest
from ..parts.kinds import STACKS
from ..parts.registry import Registry, get_registry
from .fields import COMPONENT_KEYS
from .yaml_source import Locs, YAMLSyntaxError, load_value, load_yaml, read_text

MAX_EXTENDS = 64  # specs in one `extends` chain

# ---------------------------------------------------------------- sources


def zoo_dirs(registry: Registry | None = None) -> list[Path]:
    """Directories searched for zoo spec names: the built-in zoo, then plugins' dirs."""
    reg = registry or get_registry()
    builtin = Path(str(resources.files("archzoo.zoo")))
    return [builtin, *reg.zoo_dirs]


def list_models(registry: Registry | None = None) -> list[str]:
    """Names of every zoo spec."""
    names = set()
    for d in zoo_dirs(registry):
        names.update(p.stem for p in d.glob("*.yaml"))
    return sorted(names)


def find_model(name: str, registry: Registry | None = None) -> Path | None:
    """The zoo file of a model name, or None."""
    for d in zoo_dirs(registry):
        p = d / f"{name}.yaml"
        if p.is_file():
            return p
    return None


def _read_source(
    source: Any, relative_to: Path | None, registry: Registry | None = None
) -> tuple[dict, Locs, str, Path | None]:
    """Raw (data, locs, identity, directory) of a name, path, dict or YAML text."""
    if isinstance(source, Mapping):
        return copy.deepcopy(dict(source)), {}, f"<dict {id(source)}>", relative_to
    if isinstance(source, Path) or (
        isinstance(source, str) and "\n" not in source and ":" not in source
    ):
        path = Path(source)
        if relative_to is not None and not path.is_absolute():
            rel = relative_to / path
            if rel.is_file():
                path = rel
        special = path.exists() and not path.is_dir() and not path.is_file()  # FIFO, device
        if not path.is_file() and not special:  # a special file is refused by read_text
            zoo = find_model(str(source), registry) if isinstance(source, str) else None
            if zoo is None:
                models = list_models(registry)
                hint = closest(str(source), models)
                failed = [
                    p for p in (registry or get_registry()).plugins.values() if p.status != "ok"
                ]
                note = "; note: plugin(s) not loaded: " if failed else ""
                note += "; ".join(f"{p.name} ({p.error})" for p in failed)
                raise SpecError(
                    [
                        SpecIssue(
                            "",
                            f"no spec file or zoo model named {str(source)!r}{note}",
                            None,
                            hint,
                        )
                    ]
                )
            path = zoo
        text = read_text(path)
        data, locs = load_yaml(text, str(path))
        return data, locs, str(path.resolve()), path.parent
    if isinstance(source, str):
        data, locs = load_yaml(source, "<text>")
        return data, locs, f"<text {hash(source)}>", relative_to
    raise SpecError([SpecIssue("", f"cannot load a spec from {type(source).__name__}")])


def load_with_extends(
    source: Any,
    relative_to: Path | None = None,
    chain: tuple[str, ...] = (),
    registry: Registry | None = None,
) -> tuple[dict, Locs]:
    """Raw spec data and key locations of a source, with its `extends:` chain merged in."""
    data, locs, ident, directory = _read_source(source, relative_to, registry)
    if not isinstance(data, dict):
        loc = locs.get((), None) or Location(ident, 1, 1)
        raise SpecError(
            [
                SpecIssue(
                    "", f"a spec must be a mapping at top level, got {type(data).__name__}", loc
                )
            ]
        )
    if len(chain) >= MAX_EXTENDS:
        names = " -> ".join([*chain[:3], "...", ident])
        msg = f"extends chain is longer than {MAX_EXTENDS} specs: {names}"
        raise SpecError([SpecIssue("extends", msg, locs.get(("extends",)))])
    if ident in chain:
        names = " -> ".join([*chain, ident])
        raise SpecError([SpecIssue("extends", f"extends cycle: {names}", locs.get(("extends",)))])
    base_ref = data.pop("extends", None)
    if base_ref is None:
        return data, locs
    if not isinstance(base_ref, str):
        msg = f"must be a zoo name or a path, got {base_ref!r}"
        raise SpecError([SpecIssue("extends", msg, locs.get(("extends",)))])
    try:
        base, base_locs = load_with_extends(base_ref, directory, (*chain, ident), registry)
    except SpecError as exc:
        issues = [
            SpecIssue(
                i.path or "extends", i.message, i.location or locs.get(("extends",)), i.suggestion
            )
            for i in exc.issues
        ]
        raise SpecError(issues) from None
    base.pop("name", None) if "name" in data else None
    return merge(base, data), merge_locs(base, base_locs, data, locs)


# ---------------------------------------------------------------- locations


def merge_locs(base: dict, base_locs: Locs, child: dict, child_locs: Locs) -> Locs:
    """Key locations of `merge(base, child)`: a key the child wrote is located in the child,
    and so is everything below a value the child replaced (a scalar, a list, a component of
    another kind); only what the child left to the base stays located in the base."""
    out = dict(base_locs)
    _claim(out, (), base, child, child_locs)
    if () in child_locs:  # the whole spec (where a missing key is reported) is the child
        out[()] = child_locs[()]
    return out


def _claim(out: Locs, prefix: tuple, base: Any, child: dict, child_locs: Locs) -> None:
    for key, value in child.items():
        path = (*prefix, key)
        loc = child_locs.get(path)
        old = base.get(key) if isinstance(base, dict) else None
        if key in STACKS and not prefix and isinstance(value, dict) and isinstance(old, dict):
            _claim(out, path, old, value, child_locs)  # a stack section merges key by key
        elif key in COMPONENT_KEYS and _same_kind(old, value):
            for sub in as_component(value):  # parameters merge: only those written move
                if (*path, sub) in child_locs:
                    out[(*path, sub)] = child_locs[(*path, sub)]
        else:  # replaced: nothing below it comes from the base any more
            for p in [p for p in out if len(p) > len(path) and p[: len(path)] == path]:
                del out[p]
            out.update({p: v for p, v in child_locs.items() if p[: len(path)] == path})
        if loc is not None:
            out[path] = loc
            if key in COMPONENT_KEYS and isinstance(value, str):  # a bare name is its kind
                out[(*path, "kind")] = loc


def _same_kind(base: Any, child: Any) -> bool:
    """Whether merge_component keeps the base's parameters (the child names no other kind)."""
    b, c = as_component(base), as_component(child)
    if not isinstance(b, dict) or not isinstance(c, dict):
        return False
    return "kind" not in c or c.get("kind") == b.get("kind")


def claim_override(locs: Locs, path: tuple, value: Any, loc: Location, merged: bool) -> None:
    """Locate an override's key, and every key below it that it wrote or replaced, at `loc`."""
    if not merged:
        for p in [p for p in locs if len(p) > len(path) and p[: len(path)] == path]:
            del locs[p]
    locs[path] = loc
    if isinstance(value, dict):
        for sub in value:
            locs[(*path, sub)] = loc
    elif path[-1] in COMPONENT_KEYS and isinstance(value, str):
        locs[(*path, "kind")] = loc


# ---------------------------------------------------------------- merging


def as_component(value: Any) -> Any:
    """A bare component name as the mapping {kind: name}; anything else unchanged."""
    return {"kind": value} if isinstance(value, str) else value


def merge_component(base: Any, child: Any) -> Any:
    """Child params on top of base; a child naming another kind replaces base entirely."""
    b, c = as_component(base), as_component(child)
    if not isinstance(b, dict) or not isinstance(c, dict):
        return copy.deepcopy(child)
    if "kind" in c and "kind" in b and c["kind"] != b["kind"]:
        return copy.deepcopy(c)
    return {**copy.deepcopy(b), **copy.deepcopy(c)}


def merge(base: dict, child: dict) -> dict:
    """Deep-merge `child` onto `base` with component semantics for component keys."""
    out = copy.deepcopy(base)
    for key, value in child.items():
        if key in COMPONENT_KEYS and key in out:
            out[key] = merge_component(out[key], value)
        elif key in STACKS and isinstance(out.get(key), dict) and isinstance(value, dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def parse_override(text: str) -> tuple[str, Any]:
    """'attention.n_kv_heads=2' -> ('attention.n_kv_heads', 2); the value is read as YAML."""
    if "=" not in text:
        raise SpecError([SpecIssue("", f"override {text!r} must look like KEY=VALUE")])
    key, raw = text.split("=", 1)
    key = key.strip()
    try:  # the spec loader's guards: an alias bomb or deep nesting is a SpecError naming `key`
        value = load_value(raw, f"<override {key}>", tuple(key.split(".")))
    except YAMLSyntaxError:  # not YAML: the text itself, as a string field would take it
        value = raw
    return key, value


def apply_overrides(data: dict, locs: Locs, overrides: Mapping[str, Any] | None) -> None:
    """Set dotted keys in place; component keys merge, others replace."""
    issues = []
    for key, value in (overrides or {}).items():
        if not isinstance(key, str):
            issues.append(SpecIssue(repr(key), "override keys must be strings (dotted keys)"))
            continue
        loc = Location(f"<override {key}>", 1, 1)
        if key == "extends":  # it is read while loading, before overrides apply
            msg = "cannot be overridden; write a spec file with `extends:` instead"
            issues.append(SpecIssue(key, msg, loc))
            continue
        path = tuple(key.split("."))
        if not all(path):
            issues.append(SpecIssue(key, "empty key in override", loc))
            continue
        node = data
        ok = True
        for i, part in enumerate(path[:-1]):
            child = node.get(part)
            if child is None:
                child = {}
            child = as_component(child) if part in COMPONENT_KEYS else child
            if not isinstance(child, dict):
                msg = f"cannot set {key!r}: {'.'.join(path[: i + 1])} is not a mapping"
                issues.append(SpecIssue(key, msg, loc))
                ok = False
                break
            node[part] = child
            node = child
        if not ok:
            continue
        last = path[-1]
        merged = last in COMPONENT_KEYS and last in node and _same_kind(node[last], value)
        if last in COMPONENT_KEYS and last in node:
            node[last] = merge_component(node[last], value)
        else:
            node[last] = copy.deepcopy(value)
        claim_override(locs, path, value, loc, merged)
    if issues:
        raise SpecError(issues)
