"""loss.png for `zoo compare`: train and eval loss per spec, mean over seeds with a min-max band."""

from __future__ import annotations

from pathlib import Path
from typing import Any

STYLES = ("-", "--", "-.", ":")
MARKERS = ("o", "s", "^", "D", "v", "P", "X")


def require_matplotlib() -> None:
    """Fail early, before training, when the plot cannot be drawn."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ValueError(
            "zoo compare draws loss.png with matplotlib, which is not installed: "
            "pip install 'archzoo[plot]' (or pass --no-plot)"
        ) from None


def _smooth(values: list[float], window: int) -> list[float]:
    """Trailing moving average (the first points average what exists so far)."""
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out


def _count(n: int) -> str:
    """27520 -> '27.5K'."""
    for size, unit in ((1e9, "B"), (1e6, "M"), (1e3, "K")):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return str(n)


def _band(curves: list[list[float]]) -> tuple[list[float], list[float], list[float]]:
    cols = list(zip(*curves, strict=True))
    return [sum(c) / len(c) for c in cols], [min(c) for c in cols], [max(c) for c in cols]


def plot_compare(report: dict[str, Any], path: Path) -> None:
    """Two panels (train, eval) sharing the step axis; one colour, dash and marker per spec."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps_total = max(r["steps"][-1] for s in report["specs"] for r in s["runs"] if r["steps"])
    window = max(1, steps_total // 50)
    fig, (ax_train, ax_eval) = plt.subplots(1, 2, figsize=(10, 4), dpi=100)
    colours = plt.get_cmap("tab10").colors
    n_seeds = report["config"]["seeds"]
    for i, spec in enumerate(report["specs"]):
        runs = spec["runs"]
        colour, style, marker = colours[i % 10], STYLES[i % 4], MARKERS[i % 7]
        label = f"{spec['label']} ({_count(spec['params'])} params)"
        steps = runs[0]["steps"]
        mean, lo, hi = _band([_smooth(r["loss"], window) for r in runs])
        ax_train.plot(steps, mean, style, color=colour, label=label, lw=1.6)
        ax_train.fill_between(steps, lo, hi, color=colour, alpha=0.2, lw=0)
        if runs[0]["eval_steps"]:
            mean, lo, hi = _band([r["eval_loss"] for r in runs])
            ax_eval.plot(
                runs[0]["eval_steps"],
                mean,
                style,
                color=colour,
                marker=marker,
                ms=4,
                label=label,
                lw=1.6,
            )
            ax_eval.fill_between(runs[0]["eval_steps"], lo, hi, color=colour, alpha=0.2, lw=0)
    seeds = f"mean of {n_seeds} seeds, band min-max" if n_seeds > 1 else "1 seed"
    smooth = f"moving average of {window} steps, " if window > 1 else ""
    ax_train.set_title(f"train loss ({smooth}{seeds})", fontsize=10)
    ax_eval.set_title(f"held-out loss ({seeds})", fontsize=10)
    for ax in (ax_train, ax_eval):
        ax.set_xlabel("step")
        ax.set_ylabel("cross-entropy (nats/token)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
