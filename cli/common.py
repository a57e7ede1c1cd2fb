"""What every `zoo` command shares: user errors, `--set` and spec sources, tables, JSON, reports.

Commands import this module; it imports no command module (cli/ has no import cycle) and
neither torch nor archzoo's core at import time, so `zoo --help` stays fast.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    import torch
    from torch import nn

    from archzoo.model_source import ModelRef
    from archzoo.specs.spec import Spec


class UserError(click.ClickException):
    """A problem with what the user asked for: `Error: ...` on stderr, exit code 2."""

    exit_code = 2


def user_errors() -> tuple[type[BaseException], ...]:
    """Exceptions that mean bad input (spec, plugin, weights, file), not a bug in archzoo."""
    import archzoo

    return (archzoo.SpecError, archzoo.RegistryError, archzoo.WeightsError, ValueError, OSError)


def utf8_text(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A text option's value; bytes that are not UTF-8 (which click passes on as lone
    surrogates) are refused naming the option, before any work."""
    from archzoo.io.tokenizer_file import invalid_utf8

    problem = invalid_utf8(value) if value is not None else None
    if problem is not None:
        raise click.BadParameter(f"not valid UTF-8 text: {problem}")
    return value


SET_OPTION = click.option(
    "--set",
    "sets",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override a spec key (dotted, YAML value).",
)


class SeedType(click.ParamType):
    """An integer torch.manual_seed takes: [-2**63, 2**64)."""

    name = "integer"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        n = click.INT.convert(value, param, ctx)
        if not -(2**63) <= n < 2**64:
            self.fail(f"{n} is out of range: a seed is an integer in [-2**63, 2**64)", param, ctx)
        return n


SEED = SeedType()


def parse_sets(sets: tuple[str, ...]) -> dict[str, Any]:
    """Turn repeated `--set KEY=VALUE` options into an overrides dict (later wins)."""
    from archzoo.specs.spec import parse_override

    return dict(parse_override(s) for s in sets)


def spec_source(name: str) -> Any:
    """A path when `name` is an existing file (so ':' in it is not read as YAML), else the name."""
    return Path(name) if Path(name).is_file() else name


def load_spec(source: str, sets: tuple[str, ...] = ()) -> Spec:
    """The resolved spec of any model name (a zoo name, a spec or weights file, a run or HF
    directory, a Hub id: only its configs are fetched), with `--set` overrides applied."""
    return resolve(source, spec_only=True).spec(parse_sets(sets))


# ---------------------------------------------------------------- naming a model

DTYPES = ("float32", "bfloat16", "float16")


def model_options(f):  # noqa: ANN001, ANN201 - a click decorator stack
    """--device, --dtype and --revision: where and in what precision a named model runs."""
    opts = [
        click.option("--device", help="Run on this device: cpu, cuda, cuda:1 ... (default: cpu)."),
        click.option(
            "--dtype", type=click.Choice(DTYPES), help="Load the weights in this precision."
        ),
        click.option("--revision", help="Hub revision (branch, tag or commit) of an org/name id."),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


def torch_device(name: str | None) -> torch.device | None:
    """--device as a torch.device that is present here (None: leave the model where it is)."""
    if name is None:
        return None
    import torch

    try:
        device = torch.device(name)
    except (RuntimeError, TypeError):
        raise UserError(
            f"--device {name!r}: expected cpu, cuda, cuda:N or another torch device"
        ) from None
    if device.type == "meta":
        raise UserError("--device meta holds no weights to run; expected cpu, cuda, cuda:N")
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0 or (device.index or 0) >= count:
            raise UserError(f"--device {name}: no such CUDA device here ({count} present)")
    return device


def resolve(source: str, revision: str | None = None, *, spec_only: bool = False) -> ModelRef:
    """What a model name on the command line names (archzoo.resolve_model)."""
    from archzoo.model_source import resolve_model

    return resolve_model(source, revision, spec_only=spec_only)


def load_named(
    source: str,
    device: str | None = None,
    dtype: str | None = None,
    revision: str | None = None,
) -> tuple[Any, ModelRef]:
    """A model with weights from any name, on --device in --dtype, and what it resolved to;
    a zoo name or spec file (no weights) is a user error that says how to get weights."""
    import torch

    from archzoo.model_source import no_weights_message

    where = torch_device(device)
    ref = resolve(source, revision)
    if not ref.has_weights:
        raise UserError(no_weights_message(source))
    model = ref.load(device=where, dtype=getattr(torch, dtype) if dtype else None)
    return model.eval(), ref


# ---------------------------------------------------------------- output


def human(n: int) -> str:
    """124439808 -> '124.4M'."""
    for size, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return str(n)


def emit_json(data: Any) -> None:
    """Print one JSON document."""
    click.echo(json.dumps(data, indent=2, default=str))


def table(rows: list[list[str]], header: list[str]) -> None:
    """Print left-aligned columns; the last column is not padded."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header) - 1)]
    for row in [header, *rows]:
        cells = [str(c).ljust(w) for c, w in zip(row, widths, strict=False)]
        click.echo("  ".join([*cells, str(row[-1])]).rstrip())


# ---------------------------------------------------------------- build reports


def components_used(spec: Spec) -> dict[str, dict[str, list[str]]]:
    """Per stack: each component key -> the component names it uses across layers."""
    from archzoo.specs.fields import COMPONENT_KEYS

    out: dict[str, dict[str, list[str]]] = {}
    for which in spec.stacks():
        cfg = spec.stack(which)
        used = {k: [cfg[k]["kind"]] for k in ("embedding", "position", "sharing")}
        for layer in spec.layer_components(which):
            for key, comp in layer.items():
                names = used.setdefault(key, [])
                if comp["kind"] not in names:
                    names.append(comp["kind"])
        used["head"] = [spec.data["head"]["kind"]]
        out[which] = {k: used[k] for k in COMPONENT_KEYS if k in used}
    return out


def part_breakdown(model: nn.Module) -> dict[str, dict[str, int]]:
    """Parameter counts of each part's children, shared tensors counted once (first seen);
    an empty module list (a stack without per-layer positions) is no part."""
    from torch import nn

    seen: set[int] = set()
    out: dict[str, dict[str, int]] = {}

    def count(params: Any) -> int:
        n = 0
        for p in params:
            if id(p) not in seen:
                seen.add(id(p))
                n += p.numel()
        return n

    for part, module in model.named_children():
        children = {
            name: count(child.parameters())
            for name, child in module.named_children()
            if not (isinstance(child, nn.ModuleList) and len(child) == 0)
        }
        own = count(module.parameters(recurse=False))
        out[part] = {**children, **({"(own)": own} if own else {})}
    return out


def stack_sizes(spec: Spec) -> dict[str, dict[str, Any]]:
    """Per stack: the sizes `zoo build` prints."""
    keys = ("d_model", "n_layers", "n_heads", "head_dim", "d_ff", "vocab_size", "max_len")
    return {w: {k: spec.stack(w)[k] for k in keys} for w in spec.stacks()}


def build_report(model: Any, context: int | None = None) -> dict[str, Any]:
    """Everything `zoo build` prints, as JSON-ready data (costs at `context` tokens)."""
    from archzoo.parts.costs import model_costs

    summary = model.summary()
    spec = model.spec
    return {
        **summary,
        "params_human": human(summary["params"]),
        **model_costs(model, context),
        "dims": stack_sizes(spec),
        "components": components_used(spec),
        "breakdown": part_breakdown(model),
        "spec": spec.to_dict(),
    }


def print_build(report: dict[str, Any]) -> None:
    """The text form of a build report: totals, parts, sizes and components per stack."""
    click.echo(f"{report['name']} ({report['family']})")
    total = report["params"]
    click.echo(f"parameters: {total:,} ({report['params_human']})")
    children = [c for b in report["breakdown"].values() for c in b]
    w = max([14, *(len(p) + 1 for p in report["parts"]), *(len(c) + 3 for c in children)])
    for part, n in report["parts"].items():
        click.echo(f"  {part:<{w}}{n:>16,}")
        for child, m in report["breakdown"].get(part, {}).items():
            if len(report["breakdown"][part]) > 1:
                click.echo(f"    {child:<{w - 2}}{m:>16,}")
    for which, dims in report["dims"].items():
        size = ", ".join(f"{k} {v}" for k, v in dims.items())
        click.echo(f"{which}: {size}")
        comps = report["components"][which]
        click.echo("  components: " + " ".join(f"{k}={','.join(v)}" for k, v in comps.items()))
    print_costs(report)


def print_costs(report: dict[str, Any]) -> None:
    """The cost lines of `zoo build`: FLOPs, KV cache and active parameters per token."""
    flops = report["flops_per_token"]
    line = f"forward FLOPs/token at context {report['context']:,}: {flops:,} ({human(flops)})"
    by_stack = report["flops_per_token_by_stack"]
    if len(by_stack) > 1:
        line += " = " + " + ".join(f"{w} {human(n)}" for w, n in by_stack.items())
    click.echo(line)
    kv = report["kv_cache_bytes_per_token"]
    if kv is not None:
        sizes = ", ".join(f"{v:,} {dtype}" for dtype, v in kv.items())
        click.echo(f"KV cache bytes/token: {sizes}")
    if "params_active" in report:
        n = report["params_active"]
        click.echo(f"active parameters/token: {n:,} ({human(n)})")
