"""Spec errors that say what is wrong, where (file:line:col and key path), and what was meant."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Location:
    """A place in a spec source: file (or '<text>', '<override>'), 1-based line and column."""

    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


@dataclass(frozen=True)
class SpecIssue:
    """One problem in a spec."""

    path: str
    message: str
    location: Location | None = None
    suggestion: str | None = None

    def __str__(self) -> str:
        where = f"{self.location}: " if self.location else ""
        key = f"{self.path}: " if self.path else ""
        hint = f" (did you mean {self.suggestion!r}?)" if self.suggestion else ""
        return f"{where}{key}{self.message}{hint}"


class SpecError(ValueError):
    """A spec that cannot be loaded or does not validate; carries every issue found."""

    def __init__(self, issues: Iterable[SpecIssue]) -> None:
        self.issues = list(issues)
        super().__init__(str(self))

    def __str__(self) -> str:
        if len(self.issues) == 1:
            return str(self.issues[0])
        lines = [f"{len(self.issues)} problems in spec:"]
        lines += [f"  - {i}" for i in self.issues]
        return "\n".join(lines)


def closest(word: object, options: Iterable[str]) -> str | None:
    """The closest option to `word`, if any is close enough to be a likely typo."""
    if not isinstance(word, str):
        return None
    got = difflib.get_close_matches(word, list(options), n=1, cutoff=0.6)
    return got[0] if got else None


def dotted(path: tuple) -> str:
    """('attention', 'n_kv_heads') -> 'attention.n_kv_heads'; list indices as [i]."""
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


class WeightsError(ValueError):
    """A weights file that cannot be read, written, or does not fit its spec."""


def printable(text: str) -> str:
    """`text` safe for a terminal: control characters (bar newline and tab) as escapes."""
    return "".join(
        c if c in "\n\t" or (c.isprintable() and c != "\x7f") else repr(c)[1:-1] for c in text
    )
