"""`zoo build` and `zoo validate`: a spec (name or file, plus `--set`) to a checked model."""

from __future__ import annotations

from pathlib import Path

import click

import archzoo

from .common import SET_OPTION, build_report, emit_json, load_spec, print_build


@click.command("build")
@click.argument("source", metavar="NAME|FILE")
@SET_OPTION
@click.option(
    "--out", type=click.Path(dir_okay=False), help="Build real weights and save them here."
)
@click.option(
    "--context",
    type=click.IntRange(min=1),
    help="Context length of the FLOPs and KV-cache figures (default: max_len).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def build_cmd(
    source: str, sets: tuple[str, ...], out: str | None, context: int | None, as_json: bool
) -> None:
    """Build a model and print its parameter counts and costs (no weights unless --out)."""
    if out:  # before the build: a bad --out must not waste the work, nor overwrite the spec
        from archzoo.io.safe_write import check_out_path

        check_out_path(out, inputs=[Path(source)])
    spec = load_spec(source, sets)
    model = archzoo.build_model(spec, device="cpu" if out else "meta")
    if out:
        archzoo.save(model, out)
    report = build_report(model, context)
    if as_json:
        return emit_json({**report, **({"out": out} if out else {})})
    print_build(report)
    if out:
        click.echo(f"wrote {out}")


@click.command("validate")
@click.argument("file", metavar="FILE")
@SET_OPTION
def validate_cmd(file: str, sets: tuple[str, ...]) -> None:
    """Check a spec file and report every problem."""
    spec = load_spec(file, sets)
    n = archzoo.build_model(spec, device="meta").num_parameters()
    click.echo(f"ok: {spec.name} ({spec.family}, {n:,} params)")
