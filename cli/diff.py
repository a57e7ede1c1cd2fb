"""`zoo diff A [B]`: what changes from one spec or model to another, and what it costs."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

import archzoo

from .common import SET_OPTION, UserError, emit_json, human, parse_sets, resolve

if TYPE_CHECKING:
    from archzoo.specs.spec import Spec


def load_any_spec(source: str, overrides: dict[str, Any] | None = None) -> Spec:
    """A resolved spec from any model name: a zoo name, a spec or .safetensors file, a run or
    HF directory (only its config.json is read), or a Hub id (only its configs are fetched)."""
    return resolve(source, spec_only=True).spec(overrides)


def diff_report(a: Spec, b: Spec, context: int | None = None) -> dict[str, Any]:
    """spec_diff plus each side's costs (built on meta) and their change."""
    from archzoo.parts.costs import model_costs
    from archzoo.specs.diff import cost_delta, spec_diff

    if context is None:  # compare at a length both models take
        context = min(a.data["max_len"], b.data["max_len"])
    costs = {}
    for side, spec in (("a", a), ("b", b)):
        model = archzoo.build_model(spec, device="meta")
        costs[side] = {"params": model.num_parameters(), **model_costs(model, context)}
    return {**spec_diff(a, b), "costs": {**costs, "delta": cost_delta(costs["a"], costs["b"])}}


def _change(x: Any, y: Any) -> str:
    def show(v: Any) -> str:
        if isinstance(v, bool) or v is None:
            return json.dumps(v)
        return f"{v:,}" if isinstance(v, int) else str(v)

    return f"{show(x)} -> {show(y)}"


def _row(label: str, text: str) -> str:
    """An indented 'label  text' row; long labels end with a colon instead of padding."""
    return f"  {label:<22}{text}" if len(label) < 22 else f"  {label}: {text}"


def _cost_line(label: str, d: dict[str, Any], unit: str = "") -> str:
    a, b = d["a"], d["b"]
    if a is None or b is None:
        shown = " -> ".join("-" if v is None else human(v) + unit for v in (a, b))
        return f"  {label:<22}{shown}"
    sign = "+" if d["change"] >= 0 else "-"
    ratio = f", x{d['ratio']:.2f}" if d["ratio"] else ""
    change = f"{sign}{human(abs(d['change']))}{unit}"
    return f"  {label:<22}{human(a)}{unit} -> {human(b)}{unit}  ({change}{ratio})"


def print_diff(report: dict[str, Any]) -> None:
    """A reviewer's summary: what changed, grouped by where, then what it costs."""
    from archzoo.specs.diff import change_text, layer_text

    fa, fb = report["family"]
    family = fa if fa == fb else f"{fa} -> {fb}"
    click.echo(f"{report['a']} -> {report['b']} ({family})")
    if report["keys"]:
        click.echo("model:")
        for key, (x, y) in report["keys"].items():
            click.echo(_row(key, _change(x, y)))
    same = True
    for which, stack in report["stacks"].items():
        if "only_in" in stack:
            click.echo(f"{which}: only in {report[stack['only_in']]}")
            same = False
            continue
        lines = [_row(k, _change(x, y)) for k, (x, y) in stack["sizes"].items()]
        for key, change in stack["components"].items():
            lines.append(_row(key, change_text(key, change)))
        for key, groups in stack["layers"].items():
            for g in groups:
                where = "" if g["layers"] == "all" else f" ({layer_text(g['layers'])})"
                lines.append(_row(key + where, change_text(key, g["change"])))
        if lines:
            click.echo(f"{which}:")
            click.echo("\n".join(lines))
            same = False
    if report["head"] is not None:
        click.echo(f"head: {change_text('head', report['head'])}")
        same = False
    if same and not report["keys"]:
        click.echo("same architecture")
    costs = report["costs"]
    ctx_a, ctx_b = costs["a"]["context"], costs["b"]["context"]
    ctx = f"{ctx_a:,}" if ctx_a == ctx_b else f"{ctx_a:,} -> {ctx_b:,}"
    click.echo(f"costs (context {ctx}):")
    delta = costs["delta"]
    click.echo(_cost_line("parameters", delta["params"]))
    if "params_active" in delta:
        click.echo(_cost_line("active parameters", delta["params_active"]))
    click.echo(_cost_line("FLOPs/token", delta["flops_per_token"]))
    if "kv_cache_bytes_per_token_bf16" in delta:
        click.echo(_cost_line("KV cache/token (bf16)", delta["kv_cache_bytes_per_token_bf16"], "B"))


@click.command("diff")
@click.argument("a", metavar="A")
@click.argument("b", metavar="[B]", required=False)
@SET_OPTION
@click.option(
    "--context",
    type=click.IntRange(min=1),
    help="Context length of the cost figures (default: the smaller max_len).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def diff_cmd(
    a: str, b: str | None, sets: tuple[str, ...], context: int | None, as_json: bool
) -> None:
    """What changes from spec/model A to B (B defaults to A; --set overrides apply to B)."""
    if b is None and not sets:
        raise UserError("zoo diff needs a second spec or model, or --set overrides of the first")
    spec_a = load_any_spec(a)
    spec_b = load_any_spec(b if b is not None else a, parse_sets(sets))
    report = diff_report(spec_a, spec_b, context)
    if as_json:
        return emit_json(report)
    print_diff(report)
