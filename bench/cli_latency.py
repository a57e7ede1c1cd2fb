"""`zoo` start-up latency: this tree against a baseline commit, with `import torch` as the floor.

Each command runs as a fresh process (`python -c` calling the CLI's `main`, with this tree
or the baseline's sources first on PYTHONPATH); runs of the baseline and of this tree are
interleaved so drifting load hits both alike, and the median of `--runs` is printed, as
wall seconds and as CPU seconds (user + system of the process and its children; on a
shared, loaded machine the CPU figure is what an idle machine's wall time would be).
"after" is with the user cache warm (what every run after the first sees), "after, no
cache" is with ARCHZOO_NO_CACHE=1 (a first run, or a changed zoo). Targets: --help <= 0.5 s,
`list models` and `show NAME` <= 1.5 s.

    python bench/cli_latency.py [--runs 5] [--baseline REV] [--write]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import write_section  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BASELINE = "4d52099"  # main before the lazy CLI: every command imported torch
RUN_ZOO = "import sys; from archzoo.cli.main import main; sys.exit(main())"
COMMANDS = [
    ("zoo --help", ["--help"], 0.5),
    ("zoo list --help", ["list", "--help"], 0.5),
    ("zoo build --help", ["build", "--help"], 0.5),
    ("zoo show --help", ["show", "--help"], 0.5),
    ("zoo list models", ["list", "models"], 1.5),
    ("zoo show gpt2", ["show", "gpt2"], 1.5),
]


def site(src: Path, dest: Path) -> Path:
    """A directory importable as `archzoo` from a source tree (core/ with its subpackages)."""
    pkg = dest / "archzoo"
    pkg.mkdir(parents=True)
    for entry in (src / "core").iterdir():
        (pkg / entry.name).symlink_to(entry)
    for sub in ("plugins", "zoo", "cli"):
        (pkg / sub).symlink_to(src / sub)
    return dest


def baseline_site(rev: str, tmp: Path) -> Path:
    """The baseline commit's sources, unpacked from git, as an importable directory."""
    src = tmp / "baseline-src"
    src.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "core", "plugins", "zoo", "cli"],
        capture_output=True,
        check=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
    return site(src, tmp / "baseline")


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall, cpu) seconds of one run of `argv`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    run = subprocess.run(argv, env=env, capture_output=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if run.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{run.stderr.decode()[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def medians(times: list[tuple[float, float]]) -> tuple[float, float]:
    return statistics.median(t[0] for t in times), statistics.median(t[1] for t in times)


def fmt(m: tuple[float, float]) -> str:
    return f"{m[0]:.2f} / {m[1]:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--baseline", default=BASELINE, help="git revision to compare with")
    parser.add_argument("--write", action="store_true", help="update bench/RESULTS.md")
    args = parser.parse_args()

    load_start = os.getloadavg()[0]
    tmp = Path(tempfile.mkdtemp(prefix="zoo-latency-"))
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ARCHZOO_")}
        sites = {"before": baseline_site(args.baseline, tmp), "after": site(ROOT, tmp / "after")}
        envs = {
            "before": {**env, "PYTHONPATH": str(sites["before"])},
            "after": {**env, "PYTHONPATH": str(sites["after"]), "ARCHZOO_CACHE_DIR": str(tmp)},
            "after, no cache": {**env, "PYTHONPATH": str(sites["after"]), "ARCHZOO_NO_CACHE": "1"},
        }
        py = [sys.executable, "-c"]
        floors = {
            "python -c pass": py + ["pass"],
            "python -c 'import torch'": py + ["import torch"],
        }
        rows = []
        for label, argv in floors.items():
            timed(argv, env)
            times = [timed(argv, env) for _ in range(args.runs)]
            rows.append((label, {"floor": medians(times)}, None))
            print(f"{label:<28} wall / cpu s: {fmt(rows[-1][1]['floor'])}", flush=True)
        for label, zoo_args, target in COMMANDS:
            argv = py + [RUN_ZOO, *zoo_args]
            for e in envs.values():  # warm-up: page cache, and the user cache of "after"
                timed(argv, e)
            times: dict[str, list[tuple[float, float]]] = {k: [] for k in envs}
            for _ in range(args.runs):
                for k, e in envs.items():
                    times[k].append(timed(argv, e))
            med = {k: medians(v) for k, v in times.items()}
            rows.append((label, med, target))
            cells = "  ".join(f"{k} {fmt(v)}" for k, v in med.items())
            print(f"{label:<28} wall / cpu s: {cells}  (target <= {target} s)", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    lines = [
        f"`python bench/cli_latency.py --runs {args.runs}`: wall time of whole processes, "
        f"median of {args.runs} interleaved runs; before = commit {args.baseline} (every "
        "command imported torch); after = this tree with the user cache warm; after, no "
        "cache = ARCHZOO_NO_CACHE=1 (the first run after an install or an edit of the zoo). "
        "Each cell is wall / CPU seconds (CPU = user + system).",
        "",
        "| command | before s | after s | after, no cache s | target s |",
        "|---|---|---|---|---|",
    ]
    lines[0] += (
        f" Load average (1 min) at start / end: {load_start:.1f} / {os.getloadavg()[0]:.1f}"
        f" on {os.cpu_count()} cores."
    )
    for label, med, target in rows:
        if target is None:
            lines.append(f"| `{label}` (floor) | {fmt(med['floor'])} | | | |")
        else:
            lines.append(
                f"| `{label}` | {fmt(med['before'])} | {fmt(med['after'])} | "
                f"{fmt(med['after, no cache'])} | {target} |"
            )
    for line in lines:
        print(line)
    if args.write:
        write_section("CLI latency (bench/cli_latency.py)", lines)


if __name__ == "__main__":
    main()
