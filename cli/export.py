"""`zoo export`: a saved, imported or zoo model out in the Hugging Face layout, checked first."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

import archzoo

from .common import (
    SEED,
    SET_OPTION,
    emit_json,
    model_options,
    parse_sets,
    resolve,
    torch_device,
)


def load_source(
    source: str,
    sets: tuple[str, ...],
    seed: int,
    device: str | None = None,
    dtype: str | None = None,
    revision: str | None = None,
) -> tuple[Any, Path | None]:
    """The model to export, and the directory of its tokenizer files: any model name with weights (a weights file, a run or HF
    directory, a Hub id), or a zoo name / spec file built with random weights (`--set`
    overrides apply to all)."""
    import torch

    where = torch_device(device)
    precision = getattr(torch, dtype) if dtype else None
    overrides = parse_sets(sets)
    ref = resolve(source, revision)
    if not ref.has_weights:
        torch.manual_seed(seed)
        spec = ref.spec(overrides)
        return archzoo.build_model(spec, device=where, dtype=precision), None
    model = ref.load(device=where, dtype=precision)
    model = with_overrides(model, overrides, source) if overrides else model
    return model, ref.directory


def with_overrides(model: Any, overrides: dict[str, Any], source: str) -> Any:
    """The same weights under a spec with `overrides` (refused when they no longer fit)."""
    from archzoo.io.weights import load_state

    spec = archzoo.load_spec(model.spec.source_data(), overrides)
    again = archzoo.build_model(spec, device="meta")
    load_state(again, dict(model.state_dict()), {}, f"{source} with --set")
    again.hf_source = model.hf_source
    again.loaded_from = model.loaded_from
    return again.eval()


@click.command("export")
@click.argument("source", metavar="MODEL")
@click.option(
    "--hf",
    "out",
    required=True,
    type=click.Path(file_okay=False),
    help="Directory to write (config.json, safetensors, generation config, tokenizer).",
)
@SET_OPTION
@click.option("--model-type", help="Export as this HF model_type (default: the first that fits).")
@click.option(
    "--max-shard-size",
    default="5GB",
    show_default=True,
    help="Split the weights into files of at most this size (bytes, KB, MB, GB).",
)
@click.option(
    "--tokenizer",
    type=click.Path(file_okay=False, exists=True),
    help="Copy tokenizer files from this directory (default: the imported HF directory).",
)
@click.option("--tolerance", type=float, help="Allowed relative probe difference.")
@click.option("--force", is_flag=True, help="Replace a non-empty output directory.")
@click.option(
    "--seed", type=SEED, default=0, show_default=True, help="Seed of a NAME's random weights."
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@model_options
def export_cmd(
    source: str,
    out: str,
    sets: tuple[str, ...],
    model_type: str | None,
    max_shard_size: str,
    tokenizer: str | None,
    tolerance: float | None,
    force: bool,
    seed: int,
    as_json: bool,
    device: str | None,
    dtype: str | None,
    revision: str | None,
) -> None:
    """Export a model to an HF directory, after transformers loaded it and matched archzoo.

    MODEL: a weights file, a `zoo train` run or HF directory, a Hub id org/name[@rev], or a
    zoo name or spec file (random weights, --seed)."""
    from archzoo.hf.files import check_target, parse_size

    inputs = [Path(p) for p in (source, tokenizer) if p is not None and Path(p).exists()]
    check_target(Path(out), overwrite=force, inputs=inputs)  # before loading anything
    parse_size(max_shard_size)
    if tolerance is not None and not tolerance >= 0:  # NaN too: no difference is "<= nan"
        raise click.BadParameter(
            f"expected a number >= 0, got {tolerance}", param_hint="--tolerance"
        )
    model, directory = load_source(source, sets, seed, device, dtype, revision)
    if tokenizer is None and model.hf_source is None and directory is not None:
        if (directory / "tokenizer.json").is_file():  # a run's or a weights file's neighbour
            tokenizer = str(directory)
    report = archzoo.to_hf(
        model,
        out,
        model_type=model_type,
        max_shard_size=max_shard_size,
        tolerance=tolerance,
        tokenizer_from=tokenizer,
        overwrite=force,
        release=True,  # the check then never holds two copies of the weights
    )
    if as_json:
        emit_json(report)
        return
    click.echo(f"wrote {report['directory']}: {report['model_type']} ({report['architecture']})")
    click.echo(f"files: {', '.join(report['files'])}")
    click.echo(f"probe: max relative difference {report['max_relative_diff']:.2g}")
