"""Plot and tabulate the muP learning-rate sweep of docs/mup.md.

Reads RUNS/{mup,sp}-lr{LR}/results.json (one `zoo compare` of w64 and w256 per learning
rate and parametrisation), writes the plot and prints a markdown table of final held-out
losses:

    python examples/mup/lr_transfer.py runs/mup-sweep docs/img/mup-lr-transfer.png
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def read_sweep(runs: Path) -> dict[str, dict[str, dict[float, float]]]:
    """{param: {spec: {lr: final eval loss}}} from every results.json under `runs`."""
    out: dict[str, dict[str, dict[float, float]]] = {}
    for results in sorted(runs.glob("*-lr*/results.json")):
        param = results.parent.name.split("-lr")[0]
        report = json.loads(results.read_text())
        lr = report["config"]["lr"]
        for s in report["specs"]:
            out.setdefault(param, {}).setdefault(s["label"], {})[lr] = s["final_eval_loss"]["mean"]
    return out


def table(sweep: dict[str, dict[str, dict[float, float]]]) -> str:
    """Markdown: one row per learning rate, one column per (parametrisation, width)."""
    cols = [(p, w) for p in sorted(sweep) for w in sorted(sweep[p], key=lambda w: int(w[1:]))]
    lrs = sorted({lr for p in sweep.values() for c in p.values() for lr in c})
    lines = ["| lr | " + " | ".join(f"{p} {w}" for p, w in cols) + " |"]
    lines.append("|---" * (len(cols) + 1) + "|")
    for lr in lrs:
        cells = []
        for p, w in cols:
            col = sweep[p][w]
            best = min(col.values())
            v = col.get(lr)
            cells.append("-" if v is None else (f"**{v:.4f}**" if v == best else f"{v:.4f}"))
        lines.append(f"| {lr:g} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(sweep: dict[str, dict[str, dict[float, float]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    titles = {"sp": "standard parametrisation", "mup": "muP (base width 64)"}
    params = [p for p in ("sp", "mup") if p in sweep]
    fig, axes = plt.subplots(1, len(params), figsize=(5 * len(params), 3.8), sharey=True)
    for ax, p in zip(axes if len(params) > 1 else [axes], params, strict=True):
        for w in sorted(sweep[p], key=lambda w: int(w[1:])):
            lrs = sorted(sweep[p][w])
            losses = [sweep[p][w][lr] for lr in lrs]
            best = min(lrs, key=lambda lr: sweep[p][w][lr])
            (line,) = ax.plot(lrs, losses, marker="o", label=f"d_model {w[1:]}")
            ax.plot([best], [sweep[p][w][best]], marker="*", ms=14, color=line.get_color())
        ax.set_xscale("log")
        ax.set_xlabel("peak learning rate (AdamW)")
        ax.set_title(titles.get(p, p))
        ax.grid(alpha=0.3)
        ax.legend()
    (axes[0] if len(params) > 1 else axes).set_ylabel("final held-out loss (nats/byte)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main() -> None:
    runs, png = Path(sys.argv[1]), Path(sys.argv[2])
    sweep = read_sweep(runs)
    plot(sweep, png)
    print(table(sweep))
    print(f"wrote {png}")


if __name__ == "__main__":
    main()
