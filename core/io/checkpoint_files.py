"""Untrusted checkpoint files: regular files only, bounded JSON, shard names kept inside."""

from __future__ import annotations

import json
import stat
from pathlib import Path, PurePosixPath
from typing import Any

from ..parts.converter import ConversionError

MAX_JSON_BYTES = 50_000_000  # config.json, index and tokenizer files are far smaller
MAX_JSON_DEPTH = 32  # real configs nest a few levels (text_config -> rope_scaling -> list)


def regular_file(path: Path, what: str) -> Path:
    """`path` if it is a regular file; a FIFO or device would block or never end."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        raise ConversionError(f"{path}: cannot read {what} ({exc.strerror})") from None
    if not stat.S_ISREG(mode):
        raise ConversionError(f"{path}: {what} is not a regular file")
    return path


def read_json(
    path: Path, what: str, max_bytes: int = MAX_JSON_BYTES, max_depth: int = MAX_JSON_DEPTH
) -> Any:
    """Parse a JSON file after checking its kind and size, then its nesting depth (a value
    nested hundreds deep passes json.loads, then overflows the recursion of whatever copies
    or compares it); errors name the file."""
    regular_file(path, what)
    size = path.stat().st_size
    if size > max_bytes:
        raise ConversionError(f"{path}: {what} is {size} bytes (more than {max_bytes})")
    try:
        value = json.loads(path.read_bytes().decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise ConversionError(f"{path}: {what} is not valid JSON ({exc})") from None
    if nesting_depth(value, max_depth) > max_depth:
        raise ConversionError(f"{path}: {what} is nested more than {max_depth} levels deep")
    return value


def nesting_depth(value: Any, stop_above: int) -> int:
    """How many objects and lists deep `value` goes (0 for a number or string), counted
    without recursion; stops at `stop_above + 1` (the first branch found deeper)."""
    deepest = 0
    stack = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            depth += 1
            if depth > stop_above:
                return depth
            stack.extend((c, depth) for c in (node.values() if isinstance(node, dict) else node))
        deepest = max(deepest, depth)
    return deepest


def index_shards(directory: Path, index: Path) -> tuple[list[Path], dict[str, str]]:
    """The shard files a model.safetensors.index.json names, each inside `directory`, and its
    weight_map (tensor name -> shard file name)."""
    data = read_json(index, "the weights index")
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise ConversionError(
            f"{index}: expected an object with a non-empty 'weight_map' of tensor -> file"
        )
    bad = sorted({repr(v) for v in weight_map.values() if not isinstance(v, str) or not v})
    if bad:
        raise ConversionError(f"{index}: weight_map values must be file names, got {bad[0]}")
    files = []
    for name in sorted(set(weight_map.values())):
        parts = PurePosixPath(name).parts
        if PurePosixPath(name).is_absolute() or ".." in parts or "\\" in name or "\0" in name:
            raise ConversionError(
                f"{index}: shard {name!r} is outside the checkpoint directory {directory}"
            )  # the name is checked, not its target: HF caches link shards to blobs elsewhere
        files.append(regular_file(directory / name, f"shard {name!r}"))
    return files, weight_map


def check_weight_map(
    directory: Path, index: Path, weight_map: dict[str, str], stored: dict[str, Path]
) -> None:
    """Every tensor is stored in the shard the weight_map names, and listed if stored."""
    problems = []
    for name, shard in weight_map.items():
        where = stored.get(name)
        if where is None:
            problems.append(f"{name!r} is listed in {shard} but stored in no shard")
        elif where != directory / shard:
            problems.append(f"{name!r} is listed in {shard} but stored in {where.name}")
    problems += [
        f"{name!r} is stored in {where.name} but not listed"
        for name, where in stored.items()
        if name not in weight_map
    ]
    if problems:
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        raise ConversionError(
            f"{index}: weight_map does not match the shards: {'; '.join(problems[:5])}{more}"
        )
