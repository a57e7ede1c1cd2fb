"""Let the tests import the plugin from src/ when it is not installed."""

from __future__ import annotations

import sys
from pathlib import Path

try:
    import archzoo_example  # noqa: F401
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
