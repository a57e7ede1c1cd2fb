"""OUT/metrics.jsonl: one JSON object per step, appended as the run goes, checked on resume.

A line counts once its newline is written: a run killed mid-append leaves a partial last line,
which readers skip and a resume drops. Any other line that is not an object with an integer
"step" is an error naming the file and line.
"""

from __future__ import annotations

import itertools
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..io.safe_write import create_temp

METRICS = "metrics.jsonl"
MAX_LINE = 1 << 20  # a record is a few hundred bytes


def records(path: Path) -> Iterator[tuple[bytes, dict[str, Any]]]:
    """Each complete line of `path` with its record, checked (streamed: the file may be long)."""
    with open(path, "rb") as f:
        for lineno in itertools.count(1):
            line = f.readline(MAX_LINE + 1)
            if not line.endswith(b"\n"):
                if len(line) > MAX_LINE:
                    raise ValueError(f"{path}:{lineno}: line longer than {MAX_LINE} bytes")
                return  # the end, or a partial last line of a killed run
            yield line, _record(line, path, lineno)


def _record(line: bytes, path: Path, lineno: int) -> dict[str, Any]:
    try:
        record = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        raise ValueError(f"{path}:{lineno}: not valid JSON ({reason})") from None
    step = record.get("step") if isinstance(record, dict) else None
    if not isinstance(step, int) or isinstance(step, bool):
        raise ValueError(
            f'{path}:{lineno}: expected a JSON object with an integer "step", '
            f"got {line[:80].decode('utf-8', 'replace').strip()!r}"
        )
    return record


def read_metrics(out: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The records of DIR/metrics.jsonl (a partial last line is skipped)."""
    return [record for _, record in records(Path(out) / METRICS)]


def check_metrics(path: Path) -> None:
    """Refuse a metrics file with a damaged line before a resume changes anything."""
    if path.is_file():
        for _ in records(path):
            pass


def keep_until(path: Path, step: int) -> None:
    """Keep the records up to `step` (a resumed run redoes the later ones); atomic rewrite."""
    if not path.is_file():
        return
    fd, tmp = create_temp(path)
    try:
        with os.fdopen(fd, "wb") as out:
            if step > 0:
                for line, record in records(path):
                    if record["step"] <= step:
                        out.write(line)
        os.chmod(tmp, stat.S_IMODE(path.stat().st_mode))
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
