"""A user cache for `zoo list models` and `zoo show NAME`, so they answer without torch.

What those commands compute depends only on the zoo's YAML files and the code of archzoo
and of the installed plugins. An entry is reused only while a fingerprint of all of that
is unchanged: archzoo's and Python's versions, the installed distributions (names and
versions: any install or upgrade starts afresh), the size and mtime of every source and
spec file of archzoo, of each plugin package (found through its entry point, not imported)
and of each plugin zoo directory, ARCHZOO_DISABLE_PLUGINS and ARCHZOO_NO_PLUGINS. Anything else (no cache
dir, an unreadable or corrupt file, an in-process registry a caller may have changed)
computes afresh. ARCHZOO_NO_CACHE=1 turns the cache off; ARCHZOO_CACHE_DIR moves it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

CACHE_DIR_ENV = "ARCHZOO_CACHE_DIR"
NO_CACHE_ENV = "ARCHZOO_NO_CACHE"
DISABLE_ENV = "ARCHZOO_DISABLE_PLUGINS"  # read by the registry
NO_PLUGINS_ENV = "ARCHZOO_NO_PLUGINS"  # read by the registry (zoo --no-plugins sets it)
FORMAT = 1
MAX_FILES = 5000  # a plugin tree larger than this is not fingerprinted: no caching
SUFFIXES = (".py", ".yaml", ".yml")
PACKAGES = ("archzoo", "archzoo.plugins", "archzoo.zoo", "archzoo.cli")


class _TooLarge(Exception):
    """A tree to fingerprint has more than MAX_FILES files."""


def cache_file() -> Path | None:
    """Where the cache lives, or None when it is turned off."""
    if os.environ.get(NO_CACHE_ENV, "") not in ("", "0"):
        return None
    root = os.environ.get(CACHE_DIR_ENV)
    if root is None:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(base, "archzoo")
    return Path(root) / "cli.json" if root else None


def _tree(path: Path, h: Any, budget: list[int]) -> None:
    """Hash the name, size and mtime of every source/spec file under `path` (or of `path`)."""
    try:
        if path.is_file():
            st = path.stat()
            h.update(f"{path}|{st.st_size}|{st.st_mtime_ns}\n".encode())
            return
        entries = sorted(os.scandir(path), key=lambda e: e.name)
    except OSError:
        h.update(f"{path}|missing\n".encode())
        return
    h.update(f"{path}|dir\n".encode())
    for e in entries:
        if e.name == "__pycache__" or e.name.startswith("."):
            continue
        if e.is_dir(follow_symlinks=True):
            _tree(Path(e.path), h, budget)
        elif e.name.endswith(SUFFIXES):
            budget[0] -= 1
            if budget[0] < 0:
                raise _TooLarge
            st = e.stat()
            h.update(f"{e.name}|{st.st_size}|{st.st_mtime_ns}\n".encode())


def _locations(module: str) -> list[Path]:
    """The files or directories of a module, found without importing it."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return []
    if spec is None:
        return []
    if spec.submodule_search_locations:
        return [Path(p) for p in spec.submodule_search_locations]
    return [Path(spec.origin)] if spec.origin else []


def _plugin_modules(h: Any) -> list[str]:
    """Hash every installed distribution's name and version (their metadata directories on
    sys.path) and return the modules of `archzoo` entry points, read without
    importlib.metadata (whose import alone costs more than the rest of the fingerprint)."""
    modules = []
    for entry in sys.path:
        try:
            names = sorted(e.name for e in os.scandir(entry or "."))
        except OSError:
            continue
        for name in names:
            if not name.endswith((".dist-info", ".egg-info")):
                continue
            h.update(f"{entry}/{name}\n".encode())
            try:
                text = Path(entry or ".", name, "entry_points.txt").read_text(encoding="utf-8")
            except OSError:
                continue
            group = None
            for line in text.splitlines():
                line = line.strip()
                if line.startswith("[") and line.endswith("]"):
                    group = line[1:-1].strip()
                elif group == "archzoo" and "=" in line:
                    h.update(f"entry point {line}\n".encode())
                    value = line.split("=", 1)[1].strip()
                    modules.append(value.split(":")[0].split(".")[0].strip())
    return modules


def fingerprint(zoo_dirs: list[str]) -> str | None:
    """A digest of everything the cached answers depend on; None when it cannot be taken."""
    import archzoo

    h = hashlib.sha256()
    h.update(f"{FORMAT}|{archzoo.__version__}|{sys.version}|{sys.executable}\n".encode())
    h.update(f"{DISABLE_ENV}={os.environ.get(DISABLE_ENV, '')}\n".encode())
    h.update(f"{NO_PLUGINS_ENV}={os.environ.get(NO_PLUGINS_ENV, '')}\n".encode())
    roots = [p for name in PACKAGES for p in _locations(name)]
    roots += [p for module in _plugin_modules(h) for p in _locations(module)]
    roots += [Path(d) for d in zoo_dirs]
    budget = [MAX_FILES]
    try:
        for root in roots:
            _tree(root, h, budget)
    except _TooLarge:
        return None
    return h.hexdigest()


def _usable() -> bool:
    """Only in a process that has not loaded the registry (the `zoo` command's own)."""
    return "archzoo.parts.registry" not in sys.modules


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    ok = isinstance(data, dict) and data.get("format") == FORMAT
    ok = ok and isinstance(data.get("zoo_dirs"), list) and isinstance(data.get("entries"), dict)
    return data if ok else {}


def _write(path: Path, data: dict[str, Any]) -> None:
    """Replace the cache file atomically; a cache that cannot be written is skipped."""
    import tempfile

    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".cli-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f)
        os.replace(tmp, path)
    except OSError:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)


def cached(key: str, compute: Callable[[], Any]) -> Any:
    """`compute()`'s JSON value, from the cache while its fingerprint holds (None: not kept)."""
    path = cache_file()
    if path is None or not _usable():
        return compute()
    data = _read(path)
    if data and key in data["entries"] and data.get("fingerprint") == fingerprint(data["zoo_dirs"]):
        return data["entries"][key]
    value = compute()
    if value is None:
        return value
    from archzoo.parts.registry import get_registry

    zoo_dirs = [str(d) for d in get_registry().zoo_dirs]
    digest = fingerprint(zoo_dirs)
    if digest is None:
        return value
    entries = data["entries"] if data.get("fingerprint") == digest else {}
    entries[key] = json.loads(json.dumps(value, default=str))
    _write(
        path, {"format": FORMAT, "fingerprint": digest, "zoo_dirs": zoo_dirs, "entries": entries}
    )
    return value
