"""`zoo train`: train a spec on text, JSONL or TSV files (alone or under torchrun)."""

from __future__ import annotations

from pathlib import Path

import click

from .common import ATTN_IMPL_OPTION, SEED, SET_OPTION, UserError, parse_sets, resolve


def train_options(f):  # noqa: ANN001, ANN201 - a click decorator stack
    """Options shared by `zoo train` and `zoo compare`."""
    from archzoo.training.config import DTYPES, OPTIMIZERS
    from archzoo.training.schedule import SCHEDULES

    d = _defaults()
    opts = [
        click.option(
            "--data",
            "data",
            multiple=True,
            required=True,
            metavar="PATH",
            help='Text, JSONL ({"text": ...} per line) or TSV (source<TAB>target) file or directory; repeatable.',
        ),
        click.option(
            "--tokenizer",
            default="bytes",
            show_default=True,
            metavar="bytes|FILE",
            help="`bytes` (UTF-8 bytes, 260 ids) or a tokenizer.json.",
        ),
        click.option("--steps", type=click.IntRange(min=1), default=d.steps, show_default=True),
        click.option(
            "--batch",
            type=click.IntRange(min=1),
            default=d.batch,
            show_default=True,
            help="Sequences per optimizer step (all processes and micro-batches together).",
        ),
        click.option(
            "--accum",
            type=click.IntRange(min=1),
            default=d.accum,
            show_default=True,
            help="Micro-batches per step (gradient accumulation).",
        ),
        click.option("--seq-len", type=click.IntRange(min=1), default=d.seq_len, show_default=True),
        click.option(
            "--pack",
            is_flag=True,
            help="Pack whole documents (JSONL records, files, end-of-document tokens) best-fit "
            "into rows, attention and positions kept per document; evaluation alike.",
        ),
        click.option(
            "--lr", type=float, default=d.lr, show_default=True, help="Peak learning rate."
        ),
        click.option(
            "--schedule", type=click.Choice(SCHEDULES), default=d.schedule, show_default=True
        ),
        click.option(
            "--warmup",
            type=click.IntRange(min=0),
            default=d.warmup,
            show_default=True,
            help="Linear warm-up steps.",
        ),
        click.option(
            "--min-lr-ratio",
            type=float,
            default=d.min_lr_ratio,
            show_default=True,
            help="Where cosine ends, as a share of --lr.",
        ),
        click.option("--label-smoothing", type=float, default=d.label_smoothing, show_default=True),
        click.option(
            "--optimizer",
            type=click.Choice(OPTIMIZERS),
            default=d.optimizer,
            show_default=True,
            help="adamw, or muon: Muon on the blocks' hidden matrices, AdamW on embeddings, "
            "heads, norms and biases (same --lr and --weight-decay).",
        ),
        click.option("--weight-decay", type=float, default=d.weight_decay, show_default=True),
        click.option(
            "--beta2", type=float, default=d.beta2, show_default=True, help="AdamW beta2."
        ),
        click.option(
            "--clip",
            type=float,
            default=d.clip,
            show_default=True,
            help="Max gradient norm (0: no clipping).",
        ),
        click.option(
            "--dtype", type=click.Choice(list(DTYPES)), default=d.dtype, show_default=True
        ),
        click.option(
            "--device", help="cpu, cuda, cuda:1 ... (default: this rank's GPU, else CPU)."
        ),
        ATTN_IMPL_OPTION,
        click.option(
            "--eval-every", type=click.IntRange(min=1), default=d.eval_every, show_default=True
        ),
        click.option(
            "--eval-examples",
            type=click.IntRange(min=1),
            default=d.eval_examples,
            show_default=True,
            help="Held-out sequences per evaluation.",
        ),
        click.option(
            "--eval-fraction",
            type=float,
            default=d.eval_fraction,
            show_default=True,
            help="Share of the data held out.",
        ),
        click.option("--no-progress", is_flag=True, help="No progress bar."),
        click.option(
            "--mup-base-width",
            type=click.IntRange(min=1),
            metavar="N",
            help="muP with base width N: the same as --set mup.base_width=N (docs/mup.md).",
        ),
        SET_OPTION,
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


def _defaults():  # noqa: ANN202
    from archzoo.training import TrainConfig

    return TrainConfig()


def spec_overrides(options: dict) -> dict:
    """The --set overrides, with --mup-base-width as mup.base_width."""
    overrides = parse_sets(options["sets"])
    if options.get("mup_base_width") is not None:
        overrides["mup.base_width"] = options["mup_base_width"]
    return overrides


def make_config(out: str, options: dict, **extra):  # noqa: ANN001, ANN003, ANN201
    """A TrainConfig from the parsed click options."""
    from archzoo.training import TrainConfig

    opts = {k: v for k, v in options.items() if k not in ("sets", "no_progress", "mup_base_width")}
    opts["data"] = list(opts["data"])
    return TrainConfig(out=out, progress=not options["no_progress"], **opts, **extra)


@click.command("train")
@click.argument("spec", metavar="NAME|FILE")
@train_options
@click.option(
    "--out",
    default="run",
    show_default=True,
    metavar="DIR",
    help="Run directory: model.safetensors, spec.yaml, tokenizer.json (a model directory), "
    "metrics.jsonl, checkpoint.safetensors.",
)
@click.option("--seed", type=SEED, default=0, show_default=True)
@click.option(
    "--save-every",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    help="Checkpoint every N steps (a killed run loses at most N - 1 steps).",
)
@click.option("--stop-at", type=click.IntRange(min=1), help="Stop after this step (resume later).")
@click.option("--resume", is_flag=True, help="Continue the run in --out from its checkpoint.")
@click.option("--fsdp", is_flag=True, help="Under torchrun: shard with FSDP2 instead of DDP.")
def train_cmd(
    spec: str,
    out: str,
    seed: int,
    save_every: int,
    stop_at: int | None,
    resume: bool,
    fsdp: bool,
    **options,
) -> None:  # noqa: ANN003
    """Train a model: causal LM (decoders), MLM (encoders), denoising or pairs (encoder-decoders)."""
    from archzoo.training import train

    cfg = make_config(
        out, options, seed=seed, save_every=save_every, stop_at=stop_at, resume=resume, fsdp=fsdp
    )
    ref = resolve(spec, spec_only=True)
    if ref.has_weights:  # training starts from random weights: a spec, not a checkpoint
        raise UserError(
            f"{spec}: zoo train starts from random weights and takes a zoo name or spec file"
            + (f" (this run's spec is {ref.directory}/spec.yaml)" if ref.kind == "archzoo" else "")
        )
    result = train(ref.spec_source, cfg, spec_overrides(options))
    history = result["history"]
    if not history or (result.get("rank", 0) != 0):
        return
    last = history[-1]
    evals = [h for h in history if "eval_loss" in h]
    line = f"step {last['step']}: loss {last['loss']:.4f}"
    if evals:
        line += f", eval loss {evals[-1]['eval_loss']:.4f} (perplexity {evals[-1]['eval_perplexity']:.2f})"
    line += f", {last['tokens_per_s']:,.0f} tokens/s"
    if result.get("padding_fraction") is not None:  # --pack
        line += f", packed rows {result['padding_fraction']:.1%} padding"
    click.echo(line)
    out = Path(result["out"])
    if (out / "model.safetensors").is_file() and last["step"] == cfg.steps:
        click.echo(
            f"wrote {out}: model.safetensors, spec.yaml, tokenizer.json, metrics.jsonl "
            f"(a model directory: zoo generate {out} --prompt TEXT)"
        )
    else:
        click.echo(f"wrote {out}/metrics.jsonl and checkpoint.safetensors")
