"""`zoo compare`: A/B runs of several specs on the same data order and seeds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from .common import human, spec_source, table
from .train import make_config, spec_overrides, train_options


def _loss(spread: dict[str, float] | None, seeds: int) -> str:
    if spread is None:
        return "-"
    return f"{spread['mean']:.4f}" + (f" ± {spread['std']:.4f}" if seeds > 1 else "")


def print_report(report: dict[str, Any]) -> None:
    """The comparison table: sizes, speed, memory and losses (± std over seeds)."""
    seeds = report["config"]["seeds"]
    rows = []
    for s in report["specs"]:
        memory = s["peak_memory"]
        rows.append(
            [
                s["label"]
                + (
                    " (" + ", ".join(f"{k}={v}" for k, v in s["matched"].items()) + ")"
                    if s["matched"]
                    else ""
                ),
                f"{s['params']:,}",
                human(s["flops_per_token"]),
                f"{s['tokens_per_s']:,.0f}" if s["tokens_per_s"] else "-",
                f"{memory / 2**20:,.0f} MB" if memory is not None else "-",
                _loss(s["final_eval_loss"], seeds),
                _loss(s["best_eval_loss"], seeds),
            ]
        )
    header = ["SPEC", "PARAMS", "FLOPS/TOKEN", "TOKENS/S", "PEAK MEM", "FINAL EVAL", "BEST EVAL"]
    table(rows, header)
    if seeds > 1:
        click.echo(f"(eval losses: mean ± standard deviation over {seeds} seeds)")


@click.command("compare")
@click.argument("specs", nargs=-1, required=True, metavar="SPEC...")
@train_options
@click.option(
    "--seeds",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Train each spec with seeds 0..N-1 (the same data order per seed).",
)
@click.option(
    "--match",
    type=click.Choice(["params", "flops"]),
    help="Resize specs 2.. to the first one's parameters or training FLOPs/token (2%).",
)
@click.option(
    "--match-by",
    type=click.Choice(["d_ff", "n_layers"]),
    default="d_ff",
    show_default=True,
    help="The size key --match changes.",
)
@click.option(
    "--out",
    default="compare",
    show_default=True,
    metavar="DIR",
    help="results.json, loss.png, and each run under DIR/runs/SPEC/seedN.",
)
@click.option("--no-plot", is_flag=True, help="Do not draw loss.png.")
def compare_cmd(
    specs: tuple[str, ...],
    seeds: int,
    match: str | None,
    match_by: str,
    out: str,
    no_plot: bool,
    **options,
) -> None:  # noqa: ANN003
    """Train specs under identical data order and seeds; print a table, write results and a plot."""
    from archzoo.training.compare import compare
    from archzoo.training.plot import plot_compare, require_matplotlib

    if not no_plot:
        require_matplotlib()
    cfg = make_config(out, options, save_every=options["steps"])
    report = compare(
        [spec_source(s) for s in specs],
        cfg,
        seeds=seeds,
        match=match,
        match_by=match_by,
        overrides=spec_overrides(options),
    )
    print_report(report)
    written = [str(Path(out) / "results.json")]
    if not no_plot:
        plot_compare(report, Path(out) / "loss.png")
        written.append(str(Path(out) / "loss.png"))
    click.echo("wrote " + " and ".join(written))
