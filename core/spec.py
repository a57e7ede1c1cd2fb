"""Spec loading: sources, `extends`, dotted overrides, resolution and collected validation."""

from __future__ import annotations

import copy
import dataclasses
import re
import typing
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from .component import check_value
from .errors import Location, SpecError, SpecIssue, closest, dotted
from .registry import Registry, get_registry
from .spec_fields import (
    COMPONENT_DEFAULTS,
    COMPONENT_KEYS,
    LAYER_KEYS,
    REQUIRED,
    STACK_KEYS,
    ModelFields,
)
from .yaml_source import Locs, load_yaml, read_text

STACKS = ("encoder", "decoder")
MAX_EXTENDS = 64  # specs in one `extends` chain
MAX_LEN = 2**24  # longest max_len: 16M positions
TOKEN_KEYS = (
    "pad_token_id",
    "bos_token_id",
    "eos_token_id",
    "decoder_start_token_id",
    "forced_eos_token_id",
)


class Spec:
    """A resolved, validated spec: plain data with every default explicit."""

    def __init__(self, data: dict[str, Any], locs: Locs | None = None) -> None:
        self.data = data
        self.locs = locs or {}

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

    def stacks(self) -> list[str]:
        """The stacks this model has, in forward order."""
        return {"encoder": ["encoder"], "decoder": ["decoder"]}.get(
            self.family, ["encoder", "decoder"]
        )

    def stack(self, which: str) -> dict[str, Any]:
        """The effective config of one stack: top-level keys with its section on top."""
        out = {k: v for k, v in self.data.items() if k not in STACKS}
        out.update(self.data.get(which, {}) if self.family == "encoder-decoder" else {})
        if out["head_dim"] is None:
            out["head_dim"] = out["d_model"] // out["n_heads"]
        if out["d_ff"] is None:
            out["d_ff"] = 4 * out["d_model"]
        if out["attention_dropout"] is None:
            out["attention_dropout"] = out["dropout"]
        return out

    def layer_components(self, which: str) -> list[dict[str, dict[str, Any]]]:
        """For each layer of a stack, its attention/ffn/block/norm configs."""
        cfg = self.stack(which)
        layers = [{k: cfg[k] for k in LAYER_KEYS if k != "select"} for _ in range(cfg["n_layers"])]
        for entry in cfg.get("layers") or []:
            for i in select_layers(entry["select"], cfg["n_layers"]):
                layers[i].update({k: v for k, v in entry.items() if k != "select"})
        return layers

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Spec) and other.data == self.data

    def __repr__(self) -> str:
        return f"Spec(name={self.name!r}, family={self.family!r})"


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


def _load_with_extends(
    source: Any, relative_to: Path | None, chain: tuple[str, ...], registry: Registry | None = None
) -> tuple[dict, Locs]:
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
        base, base_locs = _load_with_extends(base_ref, directory, (*chain, ident), registry)
    except SpecError as exc:
        issues = [
            SpecIssue(
                i.path or "extends", i.message, i.location or locs.get(("extends",)), i.suggestion
            )
            for i in exc.issues
        ]
        raise SpecError(issues) from None
    base.pop("name", None) if "name" in data else None
    return merge(base, data), {**base_locs, **locs}


# ---------------------------------------------------------------- merging


def _as_component(value: Any) -> Any:
    return {"kind": value} if isinstance(value, str) else value


def merge_component(base: Any, child: Any) -> Any:
    """Child params on top of base; a child naming another kind replaces base entirely."""
    b, c = _as_component(base), _as_component(child)
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
    try:
        value = yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError:
        value = raw
    return key.strip(), value


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
            child = _as_component(child) if part in COMPONENT_KEYS else child
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
        if last in COMPONENT_KEYS and last in node:
            node[last] = merge_component(node[last], value)
        else:
            node[last] = copy.deepcopy(value)
        locs[path] = loc
    if issues:
        raise SpecError(issues)


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
            value = data[f.name]
            if f.name in REQUIRED and value is None:
                self.issue(path + (f.name,), "is required")
            err = check_value(value, hints[f.name], dict(f.metadata))
            if err:
                self.issue(path + (f.name,), err, _choice_hint(value, hints[f.name], f))
            out[f.name] = value
        return out

    def component(self, kind: str, value: Any, path: tuple) -> dict | None:
        """Resolve one component value to {kind: name, every param explicit}."""
        value = _as_component(value)
        if not isinstance(value, dict):
            self.issue(path, f"must be a {kind} name or a mapping with 'kind:', got {value!r}")
            return None
        name = value.get("kind")
        if not isinstance(name, str):
            self.issue(path + ("kind",), f"must name a {kind} component, got {name!r}")
            return None
        if not self.registry.has(kind, name):
            self.issue(
                path + ("kind",),
                # keep the registry's note on plugins that failed to load; drop its hint
                re.sub(
                    r" \(did you mean .*?\?\)", "", self.registry.unknown_message(kind, name)
                ).rsplit("; known: ", 1)[0]
                + f"; known: {', '.join(self.registry.names(kind))}",
                closest(name, self.registry.names(kind)),
            )
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
                err = check_value(value[fname], hints[fname], dict(f.metadata))
                if err:
                    self.issue(path + (fname,), err, _choice_hint(value[fname], hints[fname], f))
                out[fname] = value[fname]
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
        spec = Spec(_ordered(out), r.locs)
        _check_model(spec, r)
        if not r.issues:
            return spec
    raise SpecError(sorted(dict.fromkeys(r.issues), key=_issue_order))  # once per issue


def _issue_order(issue: SpecIssue) -> tuple:
    loc = issue.location
    return (0, loc.file, loc.line, loc.col) if loc else (1, "", 0, 0)


def _ordered(out: dict) -> dict:
    order = [f.name for f in dataclasses.fields(ModelFields)] + list(COMPONENT_KEYS)
    order += ["layers", *STACKS]
    return {k: out[k] for k in order if k in out}


def _check_model(spec: Spec, r: _Resolver) -> None:
    """Cross-field checks: sizes, capabilities, family and head, per stack and layer."""
    from .interfaces import Dims

    reg = r.registry
    family = spec.family
    head_cls = reg.get("head", spec.data["head"]["kind"])
    if family not in head_cls.families:
        r.issue(
            ("head", "kind"),
            f"head {head_cls.name!r} does not fit a {family} model; "
            f"it fits: {', '.join(head_cls.families)}",
        )
    vocab = spec.data["vocab_size"]
    for key in TOKEN_KEYS:  # generation would index past the embedding table
        value = spec.data[key]
        for tok in value if isinstance(value, list) else [value]:
            if tok is not None and not 0 <= tok < vocab:
                r.issue((key,), f"token id {tok} is outside the vocabulary 0..{vocab - 1}")
    est = 0
    for which in spec.stacks():
        cfg = spec.stack(which)
        prefix = (which,) if family == "encoder-decoder" else ()
        explicit_hd = (spec.data.get(which, {}) if family == "encoder-decoder" else {}).get(
            "head_dim", spec.data["head_dim"]
        )
        if explicit_hd is None and cfg["d_model"] % cfg["n_heads"]:
            r.issue(
                prefix + ("n_heads",),
                f"d_model {cfg['d_model']} is not divisible by "
                f"n_heads {cfg['n_heads']} (set head_dim to decouple them)",
            )
            continue
        dims = _dims(cfg, Dims)
        causal = family == "decoder" or which == "decoder"
        cross = family == "encoder-decoder" and which == "decoder"
        pos_cls = reg.get("position", cfg["position"]["kind"])
        layers = spec.layer_components(which)
        for key in ("embedding", "position", "sharing"):
            key_dims = position_dims(reg, cfg, dims) if key == "position" else dims
            _component_check(r, reg, key, cfg[key], key_dims, prefix + (key,))
        for i, comps in enumerate(layers):
            where = prefix if i == 0 or comps == layers[0] else prefix + ("layers",)
            for key, comp in comps.items():
                _component_check(r, reg, key, comp, dims, where + (key,))
            att = reg.get("attention", comps["attention"]["kind"])
            caps = att.capabilities
            if causal and not caps.causal:
                r.issue(
                    where + ("attention", "kind"),
                    f"attention {att.name!r} cannot be causal, which a {which} stack needs",
                )
            if not causal and not caps.bidirectional:
                r.issue(
                    where + ("attention", "kind"),
                    f"attention {att.name!r} is causal-only; an {which} stack is bidirectional",
                )
            if pos_cls.capabilities.rotate and not caps.accepts_rotate:
                r.issue(
                    where + ("attention", "kind"),
                    f"attention {att.name!r} cannot apply "
                    f"the rotation of position {pos_cls.name!r}",
                )
            if pos_cls.capabilities.bias and not caps.accepts_bias:
                r.issue(
                    where + ("attention", "kind"),
                    f"attention {att.name!r} cannot add "
                    f"the score bias of position {pos_cls.name!r}",
                )
            if cross and not reg.get("attention", "mha").capabilities.cross:
                r.issue(where + ("attention",), "no attention can cross-attend")
        sharing = reg.get("sharing", cfg["sharing"]["kind"])(
            sharing_config(reg, cfg["sharing"]), dims
        )
        try:
            groups = sharing.assign(cfg["n_layers"])
        except ValueError as exc:
            r.issue(prefix + ("sharing",), str(exc))
            groups = list(range(cfg["n_layers"]))
        first: dict[int, dict] = {}
        for i, g in enumerate(groups):
            if g in first and first[g] != layers[i]:
                r.issue(
                    prefix + ("layers",),
                    f"layer {i} shares parameters with another layer but has different components",
                )
                break
            first.setdefault(g, layers[i])
        d, ff, inner = cfg["d_model"], cfg["d_ff"], cfg["n_heads"] * cfg["head_dim"]
        est += len(first) * (4 * d * inner + 3 * d * ff)
        if pos_cls.capabilities.embed:  # a position table may hold max_len vectors
            est += cfg["max_len"] * d
    est += spec.data["vocab_size"] * spec.data["d_model"]
    if spec.data["max_len"] > MAX_LEN:  # position tables, caches and masks scale with it
        r.issue(("max_len",), f"must be <= {MAX_LEN}, got {spec.data['max_len']}")
    if est > 2e12:
        r.issue(("d_model",), f"absurd size: about {est:.2e} parameters (limit 2e12)")


def _dims(cfg: dict, dims_cls: type) -> Any:
    return dims_cls(
        vocab_size=cfg["vocab_size"],
        d_model=cfg["d_model"],
        n_heads=cfg["n_heads"],
        head_dim=cfg["head_dim"],
        d_ff=cfg["d_ff"],
        max_len=cfg["max_len"],
        n_layers=cfg["n_layers"],
        dropout=cfg["dropout"],
        attention_dropout=cfg["attention_dropout"],
        init_std=cfg["init_std"],
        pad_token_id=cfg["pad_token_id"],
    )


def stack_dims(cfg: dict) -> Any:
    """Dims of one stack's effective config."""
    from .interfaces import Dims

    return _dims(cfg, Dims)


def position_dims(reg: Registry, cfg: dict, dims: Any) -> Any:
    """Dims of a stack's position component: d_model is the embedding's `embed_width`."""
    comp = cfg["embedding"]
    width = reg.get("embedding", comp["kind"]).embed_width(
        component_config(reg, "embedding", comp), dims
    )
    return dims if width == dims.d_model else dataclasses.replace(dims, d_model=width)


def sharing_config(reg: Registry, comp: dict) -> Any:
    return component_config(reg, "sharing", comp)


def component_config(reg: Registry, kind: str, comp: dict) -> Any:
    """The typed config dataclass of a resolved component mapping."""
    cls = reg.get(kind, comp["kind"])
    return cls.Config(**{k: v for k, v in comp.items() if k != "kind"})


def _component_check(
    r: _Resolver, reg: Registry, kind: str, comp: dict, dims: Any, path: tuple
) -> None:
    cls = reg.get(kind, comp["kind"])
    if cls.capabilities.even_head_dim and dims.head_dim % 2:
        r.issue(
            path + ("kind",),
            f"{kind} {cls.name!r} needs an even head dimension, got head_dim {dims.head_dim}",
        )
    try:
        problems = list(cls.check(component_config(reg, kind, comp), dims))
    except Exception as exc:  # noqa: BLE001 - a plugin's check() must not crash validation
        plugin = reg.plugin_of(kind, cls.name)
        r.issue(path, f"{kind} {cls.name!r} (plugin {plugin!r}) check() failed: {exc!r}")
        return
    for pname, problem in problems:
        r.issue(path + ((pname,) if pname else ()), problem)


# ---------------------------------------------------------------- entry point


def load_spec(
    source: Any,
    overrides: Mapping[str, Any] | None = None,
    *,
    registry: Registry | None = None,
) -> Spec:
    """Load a spec from a zoo name, a path, a dict, YAML text or a Spec; apply overrides."""
    if isinstance(source, Spec):
        data, locs = source.to_dict(), dict(source.locs)
    else:
        data, locs = _load_with_extends(source, None, (), registry)
    apply_overrides(data, locs, overrides)
    return resolve(data, locs, registry)
