"""`zoo compare`: train several specs on the same data order and seeds, then tabulate and plot."""

from __future__ import annotations

import gc
import json
import shutil
import statistics
import tempfile
from dataclasses import replace
from pathlib import Path, PurePosixPath
from typing import Any

from ..model.builder import build_model
from ..parts.costs import model_costs
from ..specs.spec import Spec, load_spec
from .checkpoint import CHECKPOINT
from .config import TrainConfig, check_out
from .loop import read_metrics, train

TOLERANCE = 0.02  # matched specs are within 2% of the first one's params or FLOPs
KNOBS = ("d_ff", "n_layers")


def size_of(spec: Spec, match: str, seq_len: int) -> int:
    """Parameters, or forward FLOPs per token at seq_len, of a spec (built on meta)."""
    model = build_model(spec, device="meta")
    return (
        model.num_parameters()
        if match == "params"
        else model_costs(model, seq_len)["flops_per_token"]
    )


def match_spec(
    source: Any, overrides: dict[str, Any], target: int, match: str, knob: str, seq_len: int
) -> tuple[Spec, dict[str, Any]]:
    """The spec with `knob` set so its size is closest to `target` (within 2%, else an error)."""
    if knob not in KNOBS:
        raise ValueError(f"--match-by {knob!r}: expected one of {', '.join(KNOBS)}")
    spec = load_spec(source, overrides)

    def size(v: int) -> int:
        return size_of(load_spec(source, {**overrides, knob: v}), match, seq_len)

    lo, hi = 1, max(4 * spec.data[knob], 8)
    while size(hi) < target and hi < 1 << 20:  # sizes grow with the knob: find a bracket
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if size(mid) < target else (lo, mid)
    best = min((lo, hi), key=lambda v: abs(size(v) - target))
    got = size(best)
    if abs(got - target) > TOLERANCE * target:
        raise ValueError(
            f"cannot match {spec.name!r} to {target:,} {match} within 2% by {knob}: the closest, "
            f"{knob}={best}, gives {got:,}; try --match-by {'d_ff' if knob == 'n_layers' else 'n_layers'}"
        )
    applied = {knob: best} if best != spec.data[knob] else {}
    return load_spec(source, {**overrides, **applied}), applied


def _spread(values: list[float]) -> dict[str, float]:
    return {
        "mean": statistics.fmean(values),
        "std": statistics.stdev(values) if len(values) > 1 else 0.0,
        "min": min(values),
        "max": max(values),
    }


def compare(
    sources: list[Any],
    cfg: TrainConfig,
    *,
    seeds: int = 1,
    match: str | None = None,
    match_by: str = "d_ff",
    overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Train every spec under seeds 0..seeds-1 with identical data order; returns the results."""
    overrides = overrides or {}
    if len(sources) < 1:
        raise ValueError("zoo compare needs at least one spec")
    specs = [load_spec(s, overrides) for s in sources]
    applied: list[dict[str, Any]] = [{} for _ in specs]
    if match:
        if match not in ("params", "flops"):
            raise ValueError(f"--match {match!r}: expected params or flops")
        target = size_of(specs[0], match, cfg.seq_len)
        for i in range(1, len(specs)):
            specs[i], applied[i] = match_spec(
                sources[i], overrides, target, match, match_by, cfg.seq_len
            )
    labels = _labels(specs, sources)
    check_out(cfg.out, cfg.data)
    out = Path(cfg.out)
    _warm_up(specs[0], cfg, out)
    results = []
    done, total = 0, len(specs) * seeds
    for spec, label, extra in zip(specs, labels, applied, strict=True):
        runs = []
        for seed in range(seeds):
            done += 1
            run_dir = out / "runs" / label / f"seed{seed}"
            run = replace(
                cfg,
                seed=seed,
                out=str(run_dir),
                data_cache=cfg.data_cache or str(out / "data"),
                resume=(run_dir / CHECKPOINT).is_file(),  # a finished or interrupted run continues
            )
            summary = train(spec, run, label=f"{label} seed {seed} ({done}/{total})")
            gc.collect()
            runs.append({"seed": seed, "summary": summary, "metrics": read_metrics(run_dir)})
        results.append(_summarise(spec, label, extra, runs))
    report = {
        "config": {**cfg.to_dict(), "seeds": seeds, "match": match, "match_by": match_by},
        "specs": results,
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(report, indent=2))
    return report


def _warm_up(spec: Spec, cfg: TrainConfig, out: Path) -> None:
    """One throwaway step first, so one-time setup (thread pools, lazy imports, allocator
    arenas) is not charged to the first spec's speed and memory; also tokenises the data."""
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".warm-up-", dir=out))  # never a directory of yours
    cache = cfg.data_cache or str(out / "data")
    try:
        train(
            spec,
            replace(
                cfg, steps=1, out=str(scratch), data_cache=cache, progress=False, eval_examples=1
            ),
        )
    finally:
        shutil.rmtree(scratch)
        if created and not any(out.iterdir()):  # refused input leaves no empty --out behind
            out.rmdir()


def _labels(specs: list[Spec], sources: list[Any]) -> list[str]:
    """Spec names, numbered when two are the same; each names a directory under DIR/runs, so
    a name that would place the runs elsewhere ('..', absolute, empty) is refused."""
    names = [s.name for s in specs]
    for name, source in zip(names, sources, strict=True):
        parts = PurePosixPath(name).parts
        if not name.strip() or not parts or parts[0] == "/" or ".." in parts:
            raise ValueError(
                f"spec {source}: its name {name!r} cannot name a run directory under "
                "--out/runs (expected a relative name without '..'); set another `name:`"
            )
    return [f"{n}-{i}" if names.count(n) > 1 else n for i, n in enumerate(names)]


def _summarise(spec: Spec, label: str, applied: dict, runs: list[dict]) -> dict[str, Any]:
    """Sizes, speed, memory and the loss curves of one spec over its seeds."""
    evals = [[m for m in r["metrics"] if "eval_loss" in m] for r in runs]
    final = [e[-1]["eval_loss"] for e in evals if e]
    best = [min(m["eval_loss"] for m in e) for e in evals if e]
    speeds = [r["summary"]["tokens_per_s"] for r in runs if r["summary"]["tokens_per_s"]]
    memory = [r["summary"]["peak_memory"] for r in runs if r["summary"]["peak_memory"] is not None]
    first = runs[0]["summary"]
    return {
        "label": label,
        "name": spec.name,
        "matched": applied,
        "params": first["params"],
        "flops_per_token": first["flops_per_token"],
        "tokens_per_s": statistics.fmean(speeds) if speeds else None,
        "peak_memory": max(memory) if memory else None,
        "final_eval_loss": _spread(final) if final else None,
        "best_eval_loss": _spread(best) if best else None,
        "final_train_loss": _spread([r["metrics"][-1]["loss"] for r in runs]),
        "runs": [
            {
                "seed": r["seed"],
                "out": r["summary"]["out"],
                "steps": [m["step"] for m in r["metrics"]],
                "loss": [m["loss"] for m in r["metrics"]],
                "eval_steps": [m["step"] for m in e],
                "eval_loss": [m["eval_loss"] for m in e],
            }
            for r, e in zip(runs, evals, strict=True)
        ],
    }
