"""Progress of long work (reading a checkpoint, writing an export, tokenising a corpus).

A tqdm bar on stderr only, so stdout (a `--json` report, generated text) stays clean. It is
shown on a terminal once the work has taken half a second; `ARCHZOO_PROGRESS=1` shows it
always (logs, tests) and `ARCHZOO_PROGRESS=0` never.
"""

from __future__ import annotations

import os
import sys
from typing import Any

ENV = "ARCHZOO_PROGRESS"
DELAY_S = 0.5  # quick work shows no bar at all


def progress_bar(total: float | None, desc: str, unit: str = "it", **kwargs: Any) -> Any:
    """A tqdm bar on stderr named `desc` (unit "B" counts bytes, scaled to kB/MB/GB)."""
    from tqdm import tqdm

    forced = os.environ.get(ENV, "").strip().lower()
    if forced in ("0", "false", "no", "off"):
        show, delay = False, 0.0
    elif forced:
        show, delay = True, 0.0
    else:
        show, delay = sys.stderr.isatty(), DELAY_S
    return tqdm(
        total=total,
        desc=desc,
        unit=unit,
        unit_scale=unit == "B",
        file=sys.stderr,
        disable=not show,
        delay=delay,
        dynamic_ncols=True,
        **kwargs,
    )
