"""The semantic difference of two resolved specs: keys, components per stack and layer, costs."""

from __future__ import annotations

from typing import Any

from ..parts.component import config_defaults
from ..parts.kinds import STACKS
from ..parts.registry import get_registry
from .fields import COMPONENT_KEYS, LAYER_KEYS
from .spec import Spec

# scalar keys compared per stack after resolution (null head_dim/d_ff made explicit)
STACK_SIZES = ("n_layers", "n_heads", "head_dim", "d_ff", "dropout", "attention_dropout")
STACK_COMPONENTS = ("embedding", "position", "sharing")
LAYER_COMPONENTS = tuple(k for k in LAYER_KEYS if k != "select")


def component_change(a: dict | None, b: dict | None) -> dict[str, Any] | None:
    """How component config `b` differs from `a` (None when equal).

    Same kind: {"kind", "params": {name: [a, b]}}; another kind: {"from", "to"} with the
    parameters each sets away from its defaults.
    """
    if a == b:
        return None
    if a is None or b is None or a["kind"] != b["kind"]:
        return {"from": a, "to": b}
    params = {k: [a.get(k), b.get(k)] for k in {*a, *b} - {"kind"} if a.get(k) != b.get(k)}
    return {"kind": a["kind"], "params": dict(sorted(params.items()))}


def _layer_changes(a: Spec, b: Spec, wa: str, wb: str, key: str) -> list[dict[str, Any]]:
    """Changes of one layer component, grouped by identical change: [{layers, change}]."""
    la = [layer[key] for layer in a.layer_components(wa)]
    lb = [layer[key] for layer in b.layer_components(wb)]
    uniform_a, uniform_b = all(c == la[0] for c in la), all(c == lb[0] for c in lb)
    if uniform_a and uniform_b:
        change = component_change(la[0], lb[0])
        return [] if change is None else [{"layers": "all", "change": change}]
    groups: list[dict[str, Any]] = []
    for i in range(min(len(la), len(lb))):
        change = component_change(la[i], lb[i])
        if change is None:
            continue
        for g in groups:
            if g["change"] == change:
                g["layers"].append(i)
                break
        else:
            groups.append({"layers": [i], "change": change})
    return groups


def _scalar_changes(a: dict, b: dict, keys: tuple[str, ...]) -> dict[str, list[Any]]:
    return {k: [a.get(k), b.get(k)] for k in keys if a.get(k) != b.get(k)}


def spec_diff(a: Spec, b: Spec) -> dict[str, Any]:
    """Changed model keys, then per stack its sizes, components and per-layer components."""
    top = [
        k
        for k in a.data
        if k not in (*COMPONENT_KEYS, *STACKS, "layers", "name", "extends", *STACK_SIZES)
    ]
    out: dict[str, Any] = {
        "a": a.name,
        "b": b.name,
        "family": [a.family, b.family],
        "keys": _scalar_changes(a.data, b.data, tuple(top)),
        "head": component_change(a.data["head"], b.data["head"]),
        "stacks": {},
    }
    for wa, wb in _stack_pairs(a, b):
        label = wa or wb if wa is None or wb is None or wa == wb else f"{wa} -> {wb}"
        if wa is None or wb is None:
            out["stacks"][label] = {"only_in": "a" if wb is None else "b"}
            continue
        sa, sb = a.stack(wa), b.stack(wb)
        sizes = _scalar_changes(sa, sb, STACK_SIZES)
        if _raw(a, wa, "attention_dropout") is None and _raw(b, wb, "attention_dropout") is None:
            sizes.pop("attention_dropout", None)  # it follows dropout on both sides
        components = {k: component_change(sa[k], sb[k]) for k in STACK_COMPONENTS}
        layers = {k: _layer_changes(a, b, wa, wb, k) for k in LAYER_COMPONENTS}
        out["stacks"][label] = {
            "sizes": sizes,
            "components": {k: v for k, v in components.items() if v is not None},
            "layers": {k: v for k, v in layers.items() if v},
        }
    return out


def _stack_pairs(a: Spec, b: Spec) -> list[tuple[str | None, str | None]]:
    """Stacks compared with each other: the single stacks of two one-stack models, else by
    name (a stack only one side has is paired with None)."""
    if len(a.stacks()) == 1 and len(b.stacks()) == 1:
        return [(a.stacks()[0], b.stacks()[0])]
    names = dict.fromkeys([*a.stacks(), *b.stacks()])
    return [(w if w in a.stacks() else None, w if w in b.stacks() else None) for w in names]


def _raw(spec: Spec, which: str, key: str) -> Any:
    """A stack key as written (before null defaults are resolved)."""
    section = spec.data.get(which) if spec.family == "encoder-decoder" else None
    return (section or {}).get(key, spec.data.get(key))


def cost_delta(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """b - a and b / a of params, FLOPs per token and bf16 KV bytes per token."""
    out = {}
    for key in ("params", "params_active", "flops_per_token"):
        if a.get(key) is not None and b.get(key) is not None:
            out[key] = {
                "a": a[key],
                "b": b[key],
                "change": b[key] - a[key],
                "ratio": _ratio(a, b, key),
            }
    kv_a, kv_b = a.get("kv_cache_bytes_per_token"), b.get("kv_cache_bytes_per_token")
    if kv_a is not None or kv_b is not None:
        va = None if kv_a is None else kv_a["bfloat16"]
        vb = None if kv_b is None else kv_b["bfloat16"]
        change = None if va is None or vb is None else vb - va
        ratio = None if not va or vb is None else vb / va
        out["kv_cache_bytes_per_token_bf16"] = {"a": va, "b": vb, "change": change, "ratio": ratio}
    return out


def _ratio(a: dict, b: dict, key: str) -> float | None:
    return b[key] / a[key] if a[key] else None


def describe_component(kind: str, comp: dict | None, other: dict | None = None) -> str:
    """'glu(activation=swiglu)': the kind with the parameters set apart from `other`: those
    both have with another value, and its own ones that are set or are sizes."""
    if comp is None:
        return "none"
    other = other or {}
    defaults = _defaults(kind, comp["kind"])
    params = {
        k: v
        for k, v in comp.items()
        if k != "kind"
        and (other[k] != v if k in other else _worth_saying(v, defaults.get(k, object())))
    }
    inner = ", ".join(f"{k}={_show(v)}" for k, v in params.items())
    return f"{comp['kind']}({inner})" if inner else comp["kind"]


def _worth_saying(value: Any, default: Any) -> bool:
    """A parameter the other kind lacks: said when set away from its default, or when it is
    a size (an integer above 1: a window of 256, an embedding of 128; not a count of 1, such
    as one group, at its default)."""
    size = isinstance(value, int) and not isinstance(value, bool) and value > 1
    return value != default or size


def _defaults(kind: str, name: str) -> dict[str, Any]:
    reg = get_registry()
    return config_defaults(reg.get(kind, name)) if reg.has(kind, name) else {}


def _show(v: Any) -> str:
    if isinstance(v, bool) or v is None:
        return {True: "true", False: "false", None: "null"}[v]
    if isinstance(v, int) and abs(v) >= 10_000:
        return f"{v:,}"
    return str(v)


def change_text(kind: str, change: dict[str, Any]) -> str:
    """One line for a component change: 'mha: bias true -> false' or 'learned -> rotary(...)'."""
    if "params" in change:
        parts = [f"{k} {_show(x)} -> {_show(y)}" for k, (x, y) in change["params"].items()]
        return f"{change['kind']}: " + ", ".join(parts)
    src = describe_component(kind, change["from"], change["to"])
    dst = describe_component(kind, change["to"], change["from"])
    return f"{src} -> {dst}"


def layer_text(layers: Any) -> str:
    """'all layers', 'layer 3', 'layers 0-5' or 'layers 1, 3, 5, ..., 11 (every 2nd)'."""
    if layers == "all":
        return "all layers"
    if len(layers) == 1:
        return f"layer {layers[0]}"
    steps = {y - x for x, y in zip(layers, layers[1:], strict=False)}
    if steps == {1}:
        return f"layers {layers[0]}-{layers[-1]}"
    if len(steps) == 1 and len(layers) > 3:
        (step,) = steps
        return f"layers {layers[0]}, {layers[1]}, ..., {layers[-1]} (every {_nth(step)})"
    return "layers " + ", ".join(str(i) for i in layers)


def _nth(n: int) -> str:
    return {2: "2nd", 3: "3rd"}.get(n, f"{n}th")
