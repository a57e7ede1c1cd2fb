"""`zoo generate`: stream text from a saved or imported model with its tokenizer.json."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import click

from archzoo.errors import printable

from .common import SEED, UserError, load_named, model_options, utf8_text


def load_model(
    source: str,
    device: str | None = None,
    dtype: str | None = None,
    revision: str | None = None,
) -> tuple[Any, Path]:
    """A model with weights from any model name (a weights file, a run or HF directory, a
    Hub id), and the directory of its tokenizer."""
    model, ref = load_named(source, device, dtype, revision)
    return model, ref.directory


def load_tokenizer(directory: Path) -> Any:
    """The tokenizer.json beside the weights, read through archzoo's guarded reader."""
    from archzoo.io.tokenizer_file import read_tokenizer

    path = directory / "tokenizer.json"
    if not path.exists():
        raise UserError(f"{directory}: no tokenizer.json beside the weights")
    return read_tokenizer(path)


def finite(value: float) -> float:
    """A temperature: a finite number above 0 (checked before any output)."""
    if not math.isfinite(value) or value <= 0:
        raise click.BadParameter(f"must be a finite number > 0, got {value}")
    return value


def probability(value: float | None) -> float | None:
    """A top-p mass in (0, 1]."""
    if value is not None and not 0 < value <= 1:  # NaN fails this too
        raise click.BadParameter(f"must be in (0, 1], got {value}")
    return value


@click.command("generate")
@click.argument("source", metavar="MODEL")
@click.option("--prompt", required=True, help="Text to continue.", callback=utf8_text)
@click.option("--max-new-tokens", default=50, show_default=True, type=click.IntRange(min=1))
@click.option("--min-new-tokens", default=0, show_default=True, type=click.IntRange(min=0))
@click.option("--do-sample", is_flag=True, help="Sample instead of greedy decoding.")
@click.option(
    "--temperature", default=1.0, show_default=True, type=float, callback=lambda c, p, v: finite(v)
)
@click.option(
    "--top-k",
    default=50,
    show_default=True,
    type=click.IntRange(min=0),
    help="Keep the k most likely tokens (0: all), as transformers.",
)
@click.option(
    "--top-p",
    type=float,
    callback=lambda c, p, v: probability(v),
    help="Keep the smallest set with this probability.",
)
@click.option("--num-beams", default=1, show_default=True, type=click.IntRange(min=1))
@click.option("--seed", type=SEED, help="Seed for sampling.")
@model_options
def generate_cmd(
    source: str,
    prompt: str,
    max_new_tokens: int,
    min_new_tokens: int,
    do_sample: bool,
    temperature: float,
    top_k: int | None,
    top_p: float | None,
    num_beams: int,
    seed: int | None,
    device: str | None,
    dtype: str | None,
    revision: str | None,
) -> None:
    """Generate a continuation of PROMPT, printing text as it is produced.

    MODEL: a weights file, a `zoo train` run or HF directory, or a Hub id org/name[@rev]."""
    import torch

    model, directory = load_model(source, device, dtype, revision)
    tokenizer = load_tokenizer(directory)
    where = next(model.parameters()).device
    ids = torch.tensor([tokenizer.encode(prompt).ids], device=where)
    if ids.shape[1] == 0:
        raise UserError("the prompt encodes to no tokens")
    max_len = model.spec.data["max_len"]
    need = max_new_tokens + (ids.shape[1] if model.family == "decoder" else 1)
    if ids.shape[1] > max_len or need > max_len:  # refused before any output
        raise UserError(
            f"--max-new-tokens {max_new_tokens} with a {ids.shape[1]}-token prompt needs "
            f"{max(need, ids.shape[1])} positions; {model.spec.name} has max_len {max_len}"
        )
    generator = torch.Generator(where).manual_seed(seed) if seed is not None else None
    context = ids[0].tolist()  # decode prompt + new tokens together so spacing is right
    printed = tokenizer.decode(context)

    def stream(token: torch.Tensor) -> None:
        nonlocal printed
        context.append(int(token[0]))
        text = tokenizer.decode(context)
        if not text.endswith("\ufffd"):  # wait for the rest of a multi-byte character
            click.echo(printable(text[len(printed) :]), nl=False)  # tokens are file data
            printed = text

    click.echo(printable(printed), nl=False)
    out = model.generate(
        ids,
        max_new_tokens=max_new_tokens,
        min_new_tokens=min_new_tokens,
        do_sample=do_sample,
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        num_beams=num_beams,
        generator=generator,
        on_token=stream if num_beams == 1 else None,
    )
    if num_beams > 1:
        if model.family == "encoder-decoder":
            context = out[0, 1:].tolist()
            printed = ""
            click.echo("\n", nl=False)
        else:
            context = out[0].tolist()
    final = tokenizer.decode(context)
    rest = final[len(printed) :] if final.startswith(printed) else final
    click.echo(printable(rest), nl=False)
    click.echo()
