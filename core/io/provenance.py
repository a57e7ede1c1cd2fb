"""Which plugin (distribution and version) provided each component a saved spec uses."""

from __future__ import annotations

import json
import re
from typing import Any

from ..parts.registry import Registry
from ..specs.fields import COMPONENT_KEYS

PROVENANCE_KEY = "archzoo.components"
_PACKAGE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")  # what pip accepts, no shell text


def components_of(data: Any) -> set[tuple[str, str]]:
    """Every (kind, name) a spec's data uses, in any stack or layer."""
    found: set[tuple[str, str]] = set()
    if isinstance(data, dict):
        for key, value in data.items():
            if (
                key in COMPONENT_KEYS
                and isinstance(value, dict)
                and isinstance(value.get("kind"), str)
            ):
                found.add((key, value["kind"]))
            found |= components_of(value)
    elif isinstance(data, list):
        for item in data:
            found |= components_of(item)
    return found


def provenance(spec_data: dict[str, Any], registry: Registry) -> dict[str, dict[str, Any]]:
    """'kind:name' -> {plugin, distribution, version} for the components of a spec."""
    out = {}
    for kind, name in sorted(components_of(spec_data)):
        if registry.has(kind, name):
            plugin = registry.plugin_of(kind, name)
            info = registry.plugins.get(plugin)
            out[f"{kind}:{name}"] = {
                "plugin": plugin,
                "distribution": info.distribution if info else None,
                "version": info.version if info else None,
            }
    return out


def install_hint(stored: str | None, registry: Registry) -> str:
    """Lines naming the package to install for each recorded component that is missing."""
    try:
        recorded = json.loads(stored) if stored else {}
    except (json.JSONDecodeError, RecursionError):
        return ""
    if not isinstance(recorded, dict):
        return ""
    lines = []
    for key, source in sorted(recorded.items()):
        kind, _, name = str(key).partition(":")
        if registry.has(kind, name) or not isinstance(source, dict):
            continue
        dist, version = source.get("distribution"), source.get("version")
        line = f"{key!r} was provided by plugin {source.get('plugin')!r}"
        if isinstance(dist, str) and _PACKAGE.match(dist):
            pin = f"=={version}" if isinstance(version, str) and _PACKAGE.match(version) else ""
            line += f" of {dist!r} {version or ''}".rstrip() + f": pip install '{dist}{pin}'"
        lines.append(line)
    return "".join(f"\n  {line}" for line in lines)
