"""Render a `zoo attn` page in headless Chromium and read back what it drew."""

from __future__ import annotations

import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def dump_dom(page: Path, profile: Path, fragment: str = "") -> tuple[str, list[str]]:
    """The DOM after the page's scripts ran, and every console line it logged (`fragment`:
    the address's #part, which sets the page's state)."""
    assert CHROMIUM is not None
    run = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={profile}",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=5000",
            "--dump-dom",
            page.as_uri() + fragment,
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout, [line for line in run.stderr.splitlines() if ":CONSOLE" in line]


class _Texts(HTMLParser):
    """Text content of the elements with a given class, in document order."""

    def __init__(self, cls: str) -> None:
        super().__init__(convert_charrefs=True)
        self.cls, self.depth, self.texts = cls, 0, []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if self.depth:
            self.depth += 1
        elif self.cls in (dict(attrs).get("class") or "").split():
            self.depth = 1
            self.texts.append("")

    def handle_endtag(self, tag: str) -> None:
        if self.depth:
            self.depth -= 1

    def handle_data(self, data: str) -> None:
        if self.depth:
            self.texts[-1] += data


class _Tags(HTMLParser):
    """The attributes of every element with a given tag name and class."""

    def __init__(self, tag: str, cls: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tag, self.cls, self.found = tag, cls, []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        found = dict(attrs)
        if tag == self.tag and self.cls in (found.get("class") or "").split():
            self.found.append(found)

    handle_startendtag = handle_starttag


def elements(dom: str, tag: str, cls: str) -> list[dict[str, str]]:
    """Attributes of each `tag` element of class `cls` in a dumped DOM, in document order."""
    parser = _Tags(tag, cls)
    parser.feed(dom)
    parser.close()
    return parser.found


def texts_of_class(dom: str, cls: str) -> list[str]:
    """The text of every element of class `cls` in a dumped DOM (entities decoded)."""
    parser = _Texts(cls)
    parser.feed(dom)
    parser.close()
    return parser.texts
