"""`zoo import`: a Hugging Face checkpoint directory in, an archzoo model (and file) out."""

from __future__ import annotations

from pathlib import Path

import click

import archzoo

from .common import build_report, emit_json, print_build


@click.command("import")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--out", type=click.Path(dir_okay=False), help="Save the weights as safetensors.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def import_cmd(directory: str, out: str | None, as_json: bool) -> None:
    """Import an HF checkpoint (config.json + safetensors); print its spec and summary."""
    if out:  # before the import: never replace a file of the checkpoint being read
        from archzoo.io.safe_write import check_out_path

        src = Path(directory)
        check_out_path(out, inputs=sorted(src.iterdir()) if src.is_dir() else [])
    model = archzoo.from_hf(directory)
    if out:
        archzoo.save(model, out)
    report = build_report(model)
    if as_json:
        emit_json({**report, "saved_to": out})
        return
    click.echo(model.spec.to_yaml().rstrip())
    click.echo("---")
    print_build(report)
    if out:
        click.echo(f"saved: {out}")
