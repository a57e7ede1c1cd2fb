"""`zoo eval`: lm-evaluation-harness tasks on a zoo model (lm-eval imported only here)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from .common import ATTN_IMPL_OPTION, UserError, check_kernel_option


@click.command("eval")
@click.argument("model", metavar="MODEL")
@click.option(
    "--tasks", required=True, help="lm-eval task or group names, comma-separated (hellaswag,...)."
)
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=8,
    show_default=True,
    help="Rows per forward.",
)
@click.option("--num-fewshot", type=click.IntRange(min=0), help="Few-shot examples per prompt.")
@click.option("--limit", type=float, help="Documents per task (a fraction of them when < 1).")
@click.option("--include-path", metavar="DIR", help="A directory of your own task YAMLs.")
@click.option("--device", help="cpu, cuda, cuda:1 ... (default: a GPU when present, else CPU).")
@click.option("--dtype", type=click.Choice(["float32", "bfloat16", "float16"]))
@ATTN_IMPL_OPTION
@click.option("--max-gen-toks", type=click.IntRange(min=1), default=256, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True, help="lm-eval's random seeds.")
@click.option("--output", metavar="FILE.json", help="Write lm-eval's results here as JSON.")
def eval_cmd(
    model: str,
    tasks: str,
    batch_size: int,
    num_fewshot: int | None,
    limit: float | None,
    include_path: str | None,
    device: str | None,
    dtype: str | None,
    attention_impl: str | None,
    max_gen_toks: int,
    seed: int,
    output: str | None,
) -> None:
    """Evaluate a model with lm-evaluation-harness tasks (the `eval` extra).

    MODEL: a `zoo train` run directory, an archzoo .safetensors file with tokenizer.json
    beside it, a Hugging Face directory or a Hub id. Prints lm-eval's table.
    """
    try:
        from lm_eval import simple_evaluate
        from lm_eval.tasks import TaskManager
        from lm_eval.utils import make_table
    except ImportError:
        raise UserError("zoo eval needs lm-eval: pip install 'archzoo[eval]'") from None
    from archzoo.evaluation.lm_eval_model import ArchzooLM

    check_kernel_option(attention_impl)

    names = [t.strip() for t in tasks.split(",") if t.strip()]
    if not names:
        raise UserError("--tasks: name at least one task")
    if include_path is not None and not Path(include_path).is_dir():
        raise UserError(f"--include-path {include_path}: not a directory")
    lm = ArchzooLM(
        pretrained=model,
        batch_size=batch_size,
        device=device,
        dtype=dtype,
        attention_impl=attention_impl,
        max_gen_toks=max_gen_toks,
    )
    manager = TaskManager(include_path=include_path)
    unknown = [n for n in names if n not in manager.all_tasks]
    if unknown:
        raise UserError(f"--tasks: unknown task(s) {', '.join(unknown)} (lm-eval ls tasks)")
    results = simple_evaluate(
        model=lm,
        tasks=names,
        num_fewshot=num_fewshot,
        limit=limit,
        task_manager=manager,
        random_seed=seed,
        numpy_random_seed=seed,
        torch_random_seed=seed,
        fewshot_random_seed=seed,
    )
    click.echo(make_table(results))
    if output:
        keep = {k: results[k] for k in ("results", "configs", "versions", "n-shot") if k in results}
        Path(output).write_text(json.dumps(keep, indent=2, default=str), encoding="utf-8")
        click.echo(f"wrote {output}")
