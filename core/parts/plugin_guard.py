"""What a third-party plugin may not do to the process while it loads: print to stdout, or
hang unnoticed.

Its output goes to stderr (so `zoo build --json` stays one JSON document), and a plugin
that takes more than a few seconds is named on stderr, with the ways to skip it.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator

SLOW_PLUGIN_S = 3.0  # then say which plugin is loading (an import of torch-sized code is ~1 s)
NO_PLUGINS_ENV = "ARCHZOO_NO_PLUGINS"  # "1": skip every third-party plugin (built-ins load)
DISABLE_ENV = "ARCHZOO_DISABLE_PLUGINS"  # comma-separated entry-point names to skip


def plugins_off() -> bool:
    """Whether ARCHZOO_NO_PLUGINS asks to skip every third-party plugin."""
    return os.environ.get(NO_PLUGINS_ENV, "").strip() not in ("", "0")


@contextlib.contextmanager
def loading_plugin(name: str, value: str) -> Iterator[None]:
    """Run a plugin's import and hook with stdout sent to stderr, naming it if it is slow."""
    stderr = sys.stderr
    note = (
        f"archzoo: still loading plugin {name!r} ({value}) after {SLOW_PLUGIN_S:g} s; "
        f"if it hangs, skip it with {DISABLE_ENV}={name}, or every plugin with "
        f"`zoo --no-plugins` or {NO_PLUGINS_ENV}=1\n"
    )

    def warn() -> None:
        with contextlib.suppress(Exception):  # a closed stderr must not kill the timer thread
            stderr.write(note)
            stderr.flush()

    timer = threading.Timer(SLOW_PLUGIN_S, warn)
    timer.daemon = True
    timer.start()
    try:
        with _stdout_to_stderr():
            yield
    finally:
        timer.cancel()


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """sys.stdout, and file descriptor 1 (a plugin's os.system or C code), onto stderr."""
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    saved = None
    try:
        saved = os.dup(1)
        os.dup2(2, 1)
    except OSError:  # no descriptor 1 or 2 (a daemon): the Python-level redirect still holds
        if saved is not None:
            os.close(saved)
            saved = None
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        if saved is not None:
            with contextlib.suppress(Exception):
                sys.stderr.flush()
            os.dup2(saved, 1)
            os.close(saved)
