"""The `zoo` command: list components, models and plugins; show, build and validate specs."""

from __future__ import annotations

import dataclasses
import difflib
import json
from pathlib import Path
from typing import Any

import click
from torch import nn

import archzoo
from archzoo.component import KINDS, Component
from archzoo.costs import model_costs
from archzoo.safe_write import check_out_path
from archzoo.spec import Spec, parse_override
from archzoo.spec_fields import COMPONENT_KEYS

USER_ERRORS = (archzoo.SpecError, archzoo.RegistryError, archzoo.WeightsError, ValueError, OSError)


class UserError(click.ClickException):
    """A problem with what the user asked for: `Error: ...` on stderr, exit code 2."""

    exit_code = 2


class ZooGroup(click.Group):
    """A click group that turns user errors into friendly messages unless --debug is given."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError:  # `zoo ... | head`: let click exit quietly
            raise
        except USER_ERRORS as exc:
            if ctx.params.get("debug"):
                raise
            raise UserError(str(exc)) from None


# ---------------------------------------------------------------- helpers


def human(n: int) -> str:
    """124439808 -> '124.4M'."""
    for size, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return str(n)


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, default=str))


def table(rows: list[list[str]], header: list[str]) -> None:
    """Print left-aligned columns; the last column is not padded."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header) - 1)]
    for row in [header, *rows]:
        cells = [str(c).ljust(w) for c, w in zip(row, widths, strict=False)]
        click.echo("  ".join([*cells, str(row[-1])]).rstrip())


def parse_sets(sets: tuple[str, ...]) -> dict[str, Any]:
    """Turn repeated `--set KEY=VALUE` options into an overrides dict (later wins)."""
    return dict(parse_override(s) for s in sets)


def spec_source(name: str) -> Any:
    """A path when `name` is an existing file (so ':' in it is not read as YAML), else the name."""
    return Path(name) if Path(name).is_file() else name


def components_used(spec: Spec) -> dict[str, dict[str, list[str]]]:
    """Per stack: each component key -> the component names it uses across layers."""
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
    """Parameter counts of each part's children, shared tensors counted once (first seen)."""
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
        children = {name: count(child.parameters()) for name, child in module.named_children()}
        own = count(module.parameters(recurse=False))
        out[part] = {**children, **({"(own)": own} if own else {})}
    return out


def stack_dims(spec: Spec) -> dict[str, dict[str, Any]]:
    keys = ("d_model", "n_layers", "n_heads", "head_dim", "d_ff", "vocab_size", "max_len")
    return {w: {k: spec.stack(w)[k] for k in keys} for w in spec.stacks()}


def build_report(model: Any, context: int | None = None) -> dict[str, Any]:
    """Everything `zoo build` prints, as JSON-ready data (costs at `context` tokens)."""
    summary = model.summary()
    spec = model.spec
    return {
        **summary,
        "params_human": human(summary["params"]),
        **model_costs(model, context),
        "dims": stack_dims(spec),
        "components": components_used(spec),
        "breakdown": part_breakdown(model),
        "spec": spec.to_dict(),
    }


def print_build(report: dict[str, Any]) -> None:
    click.echo(f"{report['name']} ({report['family']})")
    total = report["params"]
    click.echo(f"parameters: {total:,} ({report['params_human']})")
    for part, n in report["parts"].items():
        click.echo(f"  {part:<14}{n:>16,}")
        for child, m in report["breakdown"].get(part, {}).items():
            if len(report["breakdown"][part]) > 1:
                click.echo(f"    {child:<12}{m:>16,}")
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


def yaml_value(v: Any) -> str:
    return json.dumps(v) if v is None or isinstance(v, bool) else repr(v)


def print_component(cls: type[Component], plugin: str) -> None:
    info = cls.describe()
    click.echo(f"{cls.kind}:{cls.name}  (plugin {plugin})")
    click.echo(f"  {info['summary']}")
    click.echo("parameters:" if info["params"] else "parameters: none")
    rows = [
        ["  " + n, p["type"], yaml_value(p["default"]), p["doc"]] for n, p in info["params"].items()
    ]
    if rows:
        table(rows, ["  name", "type", "default", "doc"])
    caps = [k for k, v in info["capabilities"].items() if v]
    click.echo(f"capabilities: {', '.join(caps) or 'none'}")


def find_component(name: str) -> type[Component] | None:
    """A component by 'kind:name' or a bare name unique across kinds; None if no component."""
    reg = archzoo.get_registry()
    if ":" in name:
        kind, cname = name.split(":", 1)
        return reg.get(kind, cname)
    matches = [c for c in reg.components() if c.name == name]
    if len(matches) > 1:
        options = ", ".join(f"{c.kind}:{c.name}" for c in matches)
        raise UserError(
            f"{name!r} is ambiguous; it names several components: {options}; use KIND:NAME"
        )
    return matches[0] if matches else None


def unknown_name(name: str) -> UserError:
    reg = archzoo.get_registry()
    known = archzoo.list_models() + [f"{c.kind}:{c.name}" for c in reg.components()]
    known += sorted({c.name for c in reg.components()})
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
    hint = f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
    return UserError(f"no model or component named {name!r}{hint}; try `zoo list`")


def component_rows(kind: str | None) -> list[dict[str, Any]]:
    reg = archzoo.get_registry()
    return [
        {
            "kind": c.kind,
            "name": c.name,
            "plugin": reg.plugin_of(c.kind, c.name),
            "summary": c.summary,
        }
        for c in reg.components(kind)
    ]


def print_components(rows: list[dict[str, Any]]) -> None:
    table([list(r.values()) for r in rows], ["KIND", "NAME", "PLUGIN", "SUMMARY"])


def model_rows() -> list[dict[str, Any]]:
    """Every zoo model with family and parameter count, built on the meta device."""
    rows = []
    for name in archzoo.list_models():
        try:
            s = archzoo.build_model(name, device="meta").summary()
            rows.append({"name": name, "family": s["family"], "params": s["params"]})
        except USER_ERRORS as exc:
            rows.append({"name": name, "family": None, "params": None, "error": str(exc)})
    return rows


def print_models(rows: list[dict[str, Any]]) -> None:
    body = [
        [r["name"], r["family"], f"{r['params']:,}", human(r["params"])]
        if r["params"] is not None
        else [r["name"], "-", "-", f"error: {r['error']}"]
        for r in rows
    ]
    table(body, ["NAME", "FAMILY", "PARAMS", ""])


def plugin_rows() -> list[dict[str, Any]]:
    return [dataclasses.asdict(p) for p in archzoo.get_registry().plugins.values()]


def print_plugins(rows: list[dict[str, Any]]) -> None:
    for p in rows:
        dist = f"{p['distribution'] or '-'} {p['version'] or ''}".strip()
        click.echo(f"{p['name']}  [{p['status']}]  from {dist}")
        if p["error"]:
            click.echo(f"  error: {p['error']}")
        if p["components"]:
            click.echo(f"  registered: {', '.join(p['components'])}")
        for d in p["zoo_dirs"]:
            click.echo(f"  zoo dir: {d}")


# ---------------------------------------------------------------- commands


@click.group(cls=ZooGroup)
@click.option("--debug", is_flag=True, help="Show tracebacks instead of short error messages.")
@click.version_option(archzoo.__version__, prog_name="zoo")
def main(debug: bool) -> None:
    """archzoo: transformer architectures from YAML specs and plugins."""


@main.command("list")
@click.argument(
    "what", type=click.Choice(["components", "models", "plugins"]), default="components"
)
@click.option("--kind", type=click.Choice(list(KINDS)), help="Only components of this kind.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def list_cmd(what: str, kind: str | None, as_json: bool) -> None:
    """List registered components (default), zoo models or plugins."""
    if kind and what != "components":
        raise click.UsageError("--kind only applies to `zoo list components`")
    if what == "components":
        rows, show = component_rows(kind), print_components
    elif what == "models":
        rows, show = model_rows(), print_models
    else:
        rows, show = plugin_rows(), print_plugins
    if as_json:
        return emit_json(rows)
    show(rows)


@main.command("plugins")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@click.pass_context
def plugins_cmd(ctx: click.Context, as_json: bool) -> None:
    """List plugins and their status (= zoo list plugins)."""
    ctx.invoke(list_cmd, what="plugins", kind=None, as_json=as_json)


@main.command("show")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of YAML/text.")
def show_cmd(name: str, as_json: bool) -> None:
    """Show a model's resolved spec or a component's parameters."""
    if name in archzoo.list_models() or Path(name).is_file():
        spec = archzoo.load_spec(spec_source(name))
        return emit_json(spec.to_dict()) if as_json else click.echo(spec.to_yaml(), nl=False)
    cls = find_component(name)
    if cls is None:
        raise unknown_name(name)
    plugin = archzoo.get_registry().plugin_of(cls.kind, cls.name)
    if as_json:
        return emit_json({**cls.describe(), "plugin": plugin})
    print_component(cls, plugin)


SET_OPTION = click.option(
    "--set",
    "sets",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override a spec key (dotted, YAML value).",
)


@main.command("build")
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
        check_out_path(out, inputs=[Path(source)])
    spec = archzoo.load_spec(spec_source(source), parse_sets(sets))
    model = archzoo.build_model(spec, device="cpu" if out else "meta")
    if out:
        archzoo.save(model, out)
    report = build_report(model, context)
    if as_json:
        return emit_json({**report, **({"out": out} if out else {})})
    print_build(report)
    if out:
        click.echo(f"wrote {out}")


@main.command("validate")
@click.argument("file", metavar="FILE")
@SET_OPTION
def validate_cmd(file: str, sets: tuple[str, ...]) -> None:
    """Check a spec file and report every problem."""
    spec = archzoo.load_spec(spec_source(file), parse_sets(sets))
    n = archzoo.build_model(spec, device="meta").num_parameters()
    click.echo(f"ok: {spec.name} ({spec.family}, {n:,} params)")


def _register_commands() -> None:
    """Commands kept in their own modules (they import helpers from this one)."""
    from .convert import import_cmd
    from .diff import diff_cmd
    from .generate import generate_cmd
    from .mask import mask as mask_cmd
    from .train import train_cmd

    main.add_command(import_cmd)
    main.add_command(diff_cmd)
    main.add_command(generate_cmd)
    main.add_command(mask_cmd)
    main.add_command(train_cmd)


_register_commands()
