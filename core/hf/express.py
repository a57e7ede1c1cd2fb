"""Which Hugging Face type expresses a spec exactly, decided from the converter tables.

For every registered converter (and each of its tasks whose head fits), the spec is written
as a config.json through the table run backwards (`Converter.hf_config`) and read back
(`Converter.to_spec`); the type expresses the spec when the two resolved specs agree in
every part that changes what the model computes or how it trains. No type is picked by
name: a GPT-2 spec with rotary positions finds GPT-NeoX because NeoX's table round-trips it.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import SpecError
from ..parts.converter import ConversionError, Converter
from ..parts.kinds import STACKS
from ..parts.registry import Registry
from ..specs.fields import COMPONENT_KEYS, STACK_KEYS
from ..specs.spec import Spec, load_spec

# spec keys that change neither the computation nor the architecture (name, init, memory)
NOT_COMPARED = ("name", "extends", "init_std", "activation_checkpointing")
STACK_SIZES = (
    "vocab_size",
    "n_layers",
    "n_heads",
    "head_dim",
    "d_ff",
    "dropout",
    "attention_dropout",
)
STACK_PARTS = ("embedding", "position", "sharing")
LAYER_PARTS = ("attention", "ffn", "block", "norm")
ABSENT = "<absent>"


class ExportError(ConversionError):
    """A model that cannot be exported: no HF type expresses it, or the probe check failed."""


@dataclass
class Expression:
    """A spec written as one HF type and task: the config and what the round trip changed."""

    model_type: str
    task: str
    config: dict[str, Any]
    differences: dict[str, tuple[Any, Any]] = field(default_factory=dict)  # path: (spec, type)
    error: str | None = None  # the type refused the config outright

    @property
    def exact(self) -> bool:
        return self.error is None and not self.differences

    def describe(self) -> str:
        """'gpt2 (position.kind: rotary -> learned; ...)'."""
        if self.error is not None:
            return f"{self.model_type} ({self.error})"
        changes = "; ".join(f"{p}: {_show(a)} -> {_show(b)}" for p, (a, b) in _collapse(self))
        return f"{self.model_type} ({changes})"


def effective_parts(spec: Spec, registry: Registry) -> dict[str, Any]:
    """Every part of a resolved spec that export must keep, by dotted path: model keys,
    the head, per stack its sizes and components, and per layer (a tuple of per-layer
    values where layers differ) the layer components."""
    data = spec.data
    out: dict[str, Any] = {"family": data["family"]}
    for key, value in data.items():
        if key in (*NOT_COMPARED, *STACK_KEYS, *STACKS, "family", "head"):
            continue
        if key == "tie_embeddings" and data["family"] != "encoder-decoder":
            continue  # one stack: nothing to share
        out[key] = value
    _flatten("head", _resolved(registry, "head", data["head"], data), out)
    for which in spec.stacks():
        lead = f"{which}." if spec.family == "encoder-decoder" else ""
        cfg = spec.stack(which)
        for key in STACK_SIZES:
            value = cfg.get(key)
            out[lead + key] = (
                cfg["dropout"] if key == "attention_dropout" and value is None else value
            )
        for key in STACK_PARTS:
            _flatten(lead + key, _resolved(registry, key, cfg[key], cfg), out)
        layers = [
            {k: _resolved(registry, k, c, cfg) for k, c in layer.items()}
            for layer in spec.layer_components(which)
        ]
        for key in LAYER_PARTS:
            params = dict.fromkeys(p for layer in layers for p in layer[key])
            for p in params:
                values = tuple(layer[key].get(p, ABSENT) for layer in layers)
                same = all(v == values[0] for v in values)
                out[f"{lead}{key}.{p}"] = values[0] if same else values
    return out


def _resolved(
    registry: Registry, kind: str, component: dict[str, Any], scope: dict[str, Any]
) -> dict[str, Any]:
    """A component's config with each null that means another value (a parameter declared
    `param(..., null="key")`) replaced by it: the component's `key`, else the stack's."""
    if not registry.has(kind, component.get("kind", "")):
        return component
    cls = registry.get(kind, component["kind"])
    out = dict(component)
    for f in dataclasses.fields(cls.Config):
        means = f.metadata.get("null")
        if means and out.get(f.name) is None:
            own = means in component and means != f.name
            out[f.name] = component[means] if own else scope.get(means)
    return out


def explicit_data(spec: Spec, registry: Registry) -> dict[str, Any]:
    """The spec's data with every null that means another value made explicit (what a
    config.json has to spell out), in the model's, each stack's and each layer entry's parts."""
    data = copy.deepcopy(spec.data)

    def fill(section: dict[str, Any], scope: dict[str, Any]) -> None:
        for key in COMPONENT_KEYS:
            if isinstance(section.get(key), dict):
                section[key] = _resolved(registry, key, section[key], scope)
        for entry in section.get("layers") or []:
            fill(entry, scope)

    fill(data, data)
    for which in STACKS:
        if isinstance(data.get(which), dict):
            fill(data[which], spec.stack(which))
    return data


def _flatten(lead: str, component: dict[str, Any], out: dict[str, Any]) -> None:
    for key, value in component.items():
        out[f"{lead}.{key}"] = value


def differences(a: dict[str, Any], b: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """Paths whose values differ: {path: (a's, b's)}."""
    paths = dict.fromkeys([*a, *b])
    return {
        p: (a.get(p, ABSENT), b.get(p, ABSENT))
        for p in paths
        if a.get(p, ABSENT) != b.get(p, ABSENT)
    }


def round_trip(converter: Converter, config: dict[str, Any], registry: Registry) -> dict[str, Any]:
    """The effective parts of the spec the converter reads from `config`."""
    data = converter.to_spec(config)
    return effective_parts(load_spec(data, registry=registry), registry)


def express(
    converter: Converter, data: dict[str, Any], task: str, registry: Registry, parts: dict[str, Any]
) -> Expression:
    """The spec (its explicit data) written as `converter`'s type and `task`, and what reading
    it back changes."""
    try:
        config = converter.hf_config(data, task)
        if converter.hf_prefix and task:
            config["architectures"] = [converter.hf_prefix + task]
        back = round_trip(converter, config, registry)
    except SpecError as exc:
        first = str(exc).splitlines()[0]
        return Expression(converter.model_type, task, {}, error=f"reads back invalid: {first}")
    except (ConversionError, KeyError, TypeError, ValueError) as exc:
        return Expression(converter.model_type, task, {}, error=f"{type(exc).__name__}: {exc}")
    return Expression(converter.model_type, task, config, differences(parts, back))


def expressions(
    spec: Spec, registry: Registry, model_types: Sequence[str] | None = None
) -> list[Expression]:
    """Every (type, task) that could hold the spec's head, in `model_types` order (default:
    every registered type with a tensor table, sorted by name)."""
    parts = effective_parts(spec, registry)
    data = explicit_data(spec, registry)
    out = []
    for model_type in model_types or registry.model_types():
        converter = registry.converter(model_type)
        if converter.tensors is None:
            continue  # a converter that overrides convert(): import only
        for task in converter.export_tasks(spec.data):
            out.append(express(converter, data, task, registry, parts))
    return out


def nearest(
    spec: Spec,
    registry: Registry,
    *,
    model_type: str | None = None,
    prefer: Iterable[str] = (),
) -> list[Expression]:
    """The exact expressions of a spec, the `prefer`red types first; ExportError naming
    every part no supported type can express (and the closest types) when there is none."""
    if model_type is not None:
        registry.converter(model_type)  # an unknown type: the error lists the supported ones
    types = [model_type] if model_type else _ordered(registry, prefer)
    found = expressions(spec, registry, types)
    exact = [e for e in found if e.exact]
    if exact:
        return exact
    raise ExportError(refusal(spec, found, model_type))


def _ordered(registry: Registry, prefer: Iterable[str]) -> list[str]:
    """The preferred types, then the types with a table of their own, then aliases and types
    that rename another's layout: a spec RoBERTa's table expresses exports as roberta unless
    it was imported as camembert (Llama's as llama unless imported as exaone)."""
    types = registry.model_types()
    first = [t for t in prefer if t in types]
    rest = [t for t in types if t not in first]
    last = [t for t in rest if registry.converter(t).alias_of or registry.converter(t).layout_of]
    return [*first, *(t for t in rest if t not in last), *last]


def refusal(spec: Spec, found: list[Expression], model_type: str | None) -> str:
    """Why no type fits: the parts none expresses, then the closest types and their changes."""
    target = f"model_type {model_type!r}" if model_type else "a supported Hugging Face type"
    head = f"cannot export {spec.name!r} as {target}: no exact equivalent"
    if not found:
        return f"{head} (no type takes a {spec.data['head']['kind']!r} head in a {spec.family})"
    readable = [e for e in found if e.error is None]
    lines = [head]
    if readable:
        blocking = set.intersection(*(set(e.differences) for e in readable))
        kinds = {p[: -len(".kind")] for p in blocking if p.endswith(".kind")}
        shown = sorted(
            p for p in blocking if p.endswith(".kind") or p.rsplit(".", 1)[0] not in kinds
        )
        if shown:
            values = readable[0].differences
            text = ", ".join(f"{p}: {_show(values[p][0])}" for p in shown)
            lines.append(f"  spec parts no supported type can express: {text}")
        else:
            lines.append("  every part is expressible by some type, but no type holds them all")
    ranked = sorted(found, key=lambda e: (e.error is not None, len(_collapse(e))))
    lines.append("  closest: " + "; ".join(e.describe() for e in ranked[:3]))
    return "\n".join(lines)


def _collapse(e: Expression) -> list[tuple[str, tuple[Any, Any]]]:
    """The differences with a component whose kind changed named once (`position.kind`)."""
    changed = {p[: -len(".kind")] for p in e.differences if p.endswith(".kind")}
    return [
        (p, v)
        for p, v in e.differences.items()
        if p.endswith(".kind") or not any(p.startswith(c + ".") for c in changed)
    ]


def _show(value: Any) -> str:
    if isinstance(value, tuple):  # per layer
        return "[" + ", ".join(map(_show, value)) + "] per layer"
    return "null" if value is None else str(value)
