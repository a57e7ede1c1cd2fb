"""Layers that differ by kind and rotary base, as GraniteSWA's config states them:
`layer_types` (a causal window of `sliding_window` keys or full attention) and a rotary base
per layer (`layer_rope_theta`, 0 for a layer that sees no positions), read into `layers:`
entries and written back."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import ConversionError, spec_parts
from archzoo.specs.plan import layer_components, stack_config

from .gemma2 import sliding_config

KINDS = ("full_attention", "sliding_attention")


def window_and_base_layers(spec: dict[str, Any], config: dict[str, Any]) -> None:
    """Each layer's attention (windowed or not, rotating or not) and rotary base as `layers:`
    entries, one per combination; the commonest combination is the stack's own."""
    n, base = spec["n_layers"], spec["position"]
    kinds = config.get("layer_types") or [KINDS[i % 4 != 0] for i in range(n)]
    thetas = config.get("layer_rope_theta") or [base["base"]] * n
    if len(kinds) != n or set(kinds) - set(KINDS) or len(thetas) != n:
        raise ConversionError(
            f"config.json layer_types={kinds!r} / layer_rope_theta={thetas!r}: expected {n} "
            f"entries each ({' / '.join(KINDS)}; a rotary base, 0 for none)"
        )
    window = config.get("sliding_window")
    if window is None and "sliding_attention" in kinds:
        raise ConversionError("config.json has sliding_attention layers but no sliding_window")
    parts = []
    for kind, theta in zip(kinds, thetas, strict=True):
        attention = dict(spec["attention"])
        if kind == "sliding_attention":
            attention.update(kind="local", window=int(window))
        if not theta:
            attention["use_position"] = False
        position = {**base, "base": float(theta)} if theta else None  # NoPE: never read
        parts.append({"attention": attention, "position": position})
    keys = [json.dumps(p) for p in parts]  # built in one key order: equal parts, equal text
    common = json.loads(Counter(keys).most_common(1)[0][0])
    common["position"] = common["position"] or base
    for part in parts:  # a NoPE layer states no rotary base of its own
        part["position"] = part["position"] or common["position"]
    group_layers(spec, parts)


def group_layers(
    spec: dict[str, Any], parts: list[dict[str, Any]], among: list[int] | None = None
) -> None:
    """Each layer's components (`parts`, one mapping per layer, built in one key order) as the
    stack's own (the commonest, of the layers `among` when given) and `layers:` entries
    stating only the components that differ."""
    keys = [json.dumps(p) for i, p in enumerate(parts) if among is None or i in among]
    common = json.loads(Counter(keys).most_common(1)[0][0])
    spec.update(common)
    entries: dict[str, list[int]] = {}
    for i, part in enumerate(parts):
        if part != common:  # the entry states only the components that differ
            own = {k: v for k, v in part.items() if v != common[k]}
            entries.setdefault(json.dumps(own), []).append(i)
    spec["layers"] = [*spec.get("layers", [])]
    spec["layers"] += [{"select": chosen, **json.loads(own)} for own, chosen in entries.items()]


def window_and_base_config(config: dict[str, Any], spec: Mapping[str, Any]) -> None:
    """The inverse of `window_and_base_layers`: `layer_types`, `sliding_window` and
    `layer_rope_theta`."""
    sliding_config(config, spec)
    config["sliding_window"] = config["sliding_window"] or 128  # an unread default
    layers = layer_components(stack_config(dict(spec), "decoder"))
    config["layer_rope_theta"] = [
        c["position"]["base"] if c["attention"].get("use_position", True) else 0 for c in layers
    ]


SINK_ATTENTION = spec_parts("attention: {kind: mha, fused_qkv: false, sinks: true}")
SINK_TENSORS = "layers.{i}.self_attn.sinks    SINKS    tensor\n"


class WindowedSinkLayers:
    """The converter mixin of Granite SWA's attention: a sink logit per head, read with
    transformers' eager path (it has no SDPA path for the sinks), and each layer's window and
    rotary base read into `layers:` entries and written back."""

    attention_impl = "eager"

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        super().adjust(spec, config)  # type: ignore[misc]
        window_and_base_layers(spec, config)

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        super().adjust_config(config, spec)  # type: ignore[misc]
        window_and_base_config(config, spec)
