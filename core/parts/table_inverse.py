"""Helpers that read a converter table backwards: spec values -> config.json keys."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .kinds import STACKS

UNWRITABLE: Any = object()  # a spec value the table has no HF spelling for


def contains(value: Any, part: Any) -> bool:
    """Whether mapping `value` has every item of mapping `part` (a resolved component
    holds its defaults beside the parameters a table entry states)."""
    if not isinstance(value, Mapping) or not isinstance(part, Mapping):
        return False
    return all(k in value and value[k] == v for k, v in part.items())


def get_path(data: Mapping[str, Any], path: str) -> Any:
    """data['a']['b'] for path 'a.b'."""
    for key in path.split("."):
        data = data[key]
    return data


def read_path(spec: Mapping[str, Any], path: str) -> Any:
    """A resolved spec's value at `path`; `encoder.x` / `decoder.x` fall back to the
    top-level `x` when the stack does not override it. KeyError when absent."""
    try:
        return get_path(spec, path)
    except (KeyError, TypeError):
        stack, _, rest = path.partition(".")
        if stack not in STACKS or not rest:
            raise KeyError(path) from None
        return get_path(spec, rest)


def label_config(head: Mapping[str, Any]) -> dict[str, Any]:
    """The inverse of `_labels`: num_labels, id2label and problem_type of a task head."""
    n = head.get("num_labels", 2)
    names = head.get("labels") or [f"LABEL_{i}" for i in range(n)]
    out: dict[str, Any] = {
        "num_labels": n,
        "id2label": {str(i): name for i, name in enumerate(names)},
        "label2id": {name: i for i, name in enumerate(names)},
    }
    if head.get("kind") == "classifier":
        problem = head.get("problem_type", "auto")
        out["problem_type"] = None if problem == "auto" else problem
    return out
