"""Safe YAML loading that remembers the line and column of every key and item."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import yaml

from ..errors import Location, SpecError, SpecIssue, dotted

MAX_NODES = 100_000  # alias expansion guard ("billion laughs")
MAX_BYTES = 1_000_000

MAX_WRITTEN_NODES = 10_000  # nodes in the text itself, counted while parsing (zoo specs: < 200)
MAX_DEPTH = 100  # nesting levels (zoo specs: < 8); deeper costs time, then a RecursionError

Locs = dict[tuple, Location]


class _TooManyNodes(Exception):
    def __init__(self, mark: yaml.Mark) -> None:
        self.mark = mark


class _TooDeep(_TooManyNodes):
    pass


class _CountingLoader(yaml.SafeLoader):
    """The safe loader, stopping at MAX_WRITTEN_NODES: a 1 MB flow list would take minutes."""

    written = 0
    depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        self.written += 1
        if self.written > MAX_WRITTEN_NODES:
            raise _TooManyNodes(self.peek_event().start_mark)
        if self.depth >= MAX_DEPTH:  # before the scanner's lookahead grows with the depth
            raise _TooDeep(self.peek_event().start_mark)
        self.depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def read_text(path: Path) -> str:
    """Read a spec file as UTF-8, with a located error for bytes that are not."""
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):  # a FIFO or device would block or never end
            raise SpecError([SpecIssue("", f"{path}: spec file is not a regular file")])
        if info.st_size > MAX_BYTES:  # checked before reading it whole
            msg = f"{path}: spec file is larger than {MAX_BYTES} bytes ({info.st_size})"
            raise SpecError([SpecIssue("", msg)])
        raw = path.read_bytes()
    except OSError as exc:
        msg = f"{path}: cannot read spec file: {exc.strerror}"
        raise SpecError([SpecIssue("", msg, None)]) from None
    if len(raw) > MAX_BYTES:  # grew while being read
        raise SpecError([SpecIssue("", f"{path}: spec file is larger than {MAX_BYTES} bytes")])
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        loc = Location(str(path), line, col)
        msg = f"file is not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start})"
        raise SpecError([SpecIssue("", msg, loc)]) from None


class YAMLSyntaxError(SpecError):
    """Text that does not parse as YAML, or holds control characters (as opposed to YAML
    that a guard refuses)."""


def load_yaml(text: str, file: str) -> tuple[Any, Locs]:
    """Parse one YAML document with the safe loader; return the data and key locations."""
    return _load(text, file, (), empty_ok=False)


def load_value(text: str, file: str, path: tuple) -> Any:
    """One value (a `--set` override's) under the same guards as a spec file: size, nodes,
    aliases, depth; issues name `path`. Text that is not YAML raises YAMLSyntaxError."""
    if len(text) > MAX_BYTES:
        msg = f"value is longer than {MAX_BYTES} characters ({len(text)})"
        raise SpecError([SpecIssue(dotted(path), msg, Location(file, 1, 1))])
    return _load(text, file, path, empty_ok=True)[0]


def _load(text: str, file: str, root: tuple, empty_ok: bool) -> tuple[Any, Locs]:
    try:
        loader = _CountingLoader(text)  # refuses control characters already here
    except yaml.reader.ReaderError as exc:
        pos = exc.position
        line, col = text.count("\n", 0, pos) + 1, pos - (text.rfind("\n", 0, pos) + 1) + 1
        code = exc.character if isinstance(exc.character, int) else ord(exc.character)
        msg = f"control character U+{code:04X} is not allowed in a spec"
        raise YAMLSyntaxError([SpecIssue(dotted(root), msg, Location(file, line, col))]) from None
    try:
        node = loader.get_single_node()
        if node is None:
            if empty_ok:
                return None, {}
            raise SpecError([SpecIssue("", "spec is empty", Location(file, 1, 1))])
        walker = _Walker(loader, file)
        data = walker.walk(node, root)
        walker.locs[root] = walker.loc(node)  # where issues of missing keys point
        return data, walker.locs
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        loc = Location(file, mark.line + 1, mark.column + 1) if mark else None
        what = exc.problem or exc.context or "invalid YAML"
        if exc.context and exc.problem:
            what = f"{exc.context}: {exc.problem}"
        msg = f"YAML syntax error: {what}"
        raise YAMLSyntaxError([SpecIssue(dotted(root), msg, loc)]) from None
    except yaml.YAMLError as exc:
        msg = f"YAML error: {exc}"
        raise YAMLSyntaxError([SpecIssue(dotted(root), msg, Location(file, 1, 1))]) from None
    except _TooDeep as exc:
        loc = Location(file, exc.mark.line + 1, exc.mark.column + 1)
        msg = f"YAML nests too deeply: more than {MAX_DEPTH} levels (a spec has a few)"
        raise SpecError([SpecIssue(dotted(root), msg, loc)]) from None
    except _TooManyNodes as exc:
        loc = Location(file, exc.mark.line + 1, exc.mark.column + 1)
        msg = f"YAML has more than {MAX_WRITTEN_NODES} nodes (a spec has a few hundred)"
        raise SpecError([SpecIssue(dotted(root), msg, loc)]) from None
    except RecursionError:  # the composer recurses once per nesting level
        msg = "YAML nests too deeply (more levels than a spec can have)"
        raise SpecError([SpecIssue(dotted(root), msg, Location(file, 1, 1))]) from None
    finally:
        loader.dispose()


class _Walker:
    def __init__(self, loader: yaml.SafeLoader, file: str) -> None:
        self.loader = loader
        self.file = file
        self.locs: Locs = {}
        self.count = 0

    def loc(self, node: yaml.Node) -> Location:
        return Location(self.file, node.start_mark.line + 1, node.start_mark.column + 1)

    def walk(self, node: yaml.Node, path: tuple) -> Any:
        self.count += 1
        if self.count > MAX_NODES:
            msg = f"YAML expands to more than {MAX_NODES} nodes (aliases repeat what they name)"
            raise SpecError([SpecIssue(_dotted(path), msg, self.loc(node))])
        if isinstance(node, yaml.MappingNode):
            self.loader.flatten_mapping(node)
            if node.tag != "tag:yaml.org,2002:map":
                self._refuse_tag(node, path)
            out: dict[Any, Any] = {}
            for key_node, value_node in node.value:
                key = self.walk(key_node, path + ("<key>",))
                if not isinstance(key, (str, int, float, bool)) or key is None:
                    msg = f"mapping keys must be plain scalars, got {type(key).__name__}"
                    raise SpecError([SpecIssue(_dotted(path), msg, self.loc(key_node))])
                if key in out:
                    msg = f"duplicate key {key!r}"
                    raise SpecError([SpecIssue(_dotted(path), msg, self.loc(key_node))])
                self.locs[path + (key,)] = self.loc(key_node)
                out[key] = self.walk(value_node, path + (key,))
            return out
        if isinstance(node, yaml.SequenceNode):
            if node.tag != "tag:yaml.org,2002:seq":
                self._refuse_tag(node, path)
            items = []
            for i, item in enumerate(node.value):
                self.locs[path + (i,)] = self.loc(item)
                items.append(self.walk(item, path + (i,)))
            return items
        try:
            return self.loader.construct_object(node, deep=True)
        except yaml.constructor.ConstructorError as exc:
            problem = exc.problem or "cannot construct value"
            raise SpecError(
                [SpecIssue(_dotted(path), f"refused YAML value: {problem}", self.loc(node))]
            ) from None
        except ValueError as exc:  # e.g. an integer of more digits than Python converts
            msg = f"refused YAML value: {str(exc).split(';')[0]}"
            raise SpecError([SpecIssue(_dotted(path), msg, self.loc(node))]) from None

    def _refuse_tag(self, node: yaml.Node, path: tuple) -> None:
        msg = f"refused YAML tag {node.tag!r}: specs hold plain data only"
        raise SpecError([SpecIssue(_dotted(path), msg, self.loc(node))])


def _dotted(path: tuple) -> str:
    return dotted(tuple(p for p in path if p != "<key>"))
