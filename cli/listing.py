"""`zoo list`, `zoo plugins` and `zoo show`: what the registry and the zoo hold."""

from __future__ import annotations

import dataclasses
import difflib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

import archzoo
from archzoo.errors import printable
from archzoo.parts.kinds import KINDS

from .cache import cached
from .common import UserError, emit_json, human, resolve, table, user_errors

if TYPE_CHECKING:
    from archzoo.parts.component import Component


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


def zoo_spec_texts(name: str) -> dict[str, Any] | None:
    """The resolved spec of zoo model `name` as YAML text and JSON data; None if no model."""
    if name not in archzoo.list_models():
        return None
    spec = archzoo.load_spec(name)
    return {"yaml": spec.to_yaml(), "json": spec.to_dict()}


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
        except user_errors() as exc:
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


def hf_type_rows() -> list[dict[str, Any]]:
    """Every model_type of the installed transformers: supported, refused or out of scope."""
    from archzoo.hf.coverage import coverage

    return [row.as_dict() for row in coverage()]


def print_hf_types(rows: list[dict[str, Any]]) -> None:
    table([list(r.values()) for r in rows], ["MODEL_TYPE", "STATUS", "WHY"])
    totals = {
        s: sum(r["status"] == s for r in rows) for s in ("supported", "refused", "out of scope")
    }
    click.echo(", ".join(f"{n} {s}" for s, n in totals.items()))


def plugin_rows() -> list[dict[str, Any]]:
    return [dataclasses.asdict(p) for p in archzoo.get_registry().plugins.values()]


def print_plugins(rows: list[dict[str, Any]]) -> None:
    for p in rows:
        dist = f"{p['distribution'] or '-'} {p['version'] or ''}".strip()
        click.echo(f"{p['name']}  [{p['status']}]  from {dist}")
        if p["error"]:
            click.echo(printable(f"  error: {p['error']}"))  # plugin text: no escapes
        if p["components"]:
            click.echo(f"  registered: {', '.join(p['components'])}")
        for d in p["zoo_dirs"]:
            click.echo(printable(f"  zoo dir: {d}"))


@click.command("list")
@click.argument(
    "what",
    type=click.Choice(["components", "models", "plugins", "hf-types"]),
    default="components",
)
@click.option("--kind", type=click.Choice(list(KINDS)), help="Only components of this kind.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def list_cmd(what: str, kind: str | None, as_json: bool) -> None:
    """List registered components (default), zoo models, plugins or hf-types (coverage)."""
    if kind and what != "components":
        raise click.UsageError("--kind only applies to `zoo list components`")
    if what == "components":
        rows, show = component_rows(kind), print_components
    elif what == "models":
        rows, show = cached("models", model_rows), print_models
    elif what == "hf-types":
        rows, show = hf_type_rows(), print_hf_types
    else:
        rows, show = plugin_rows(), print_plugins
    if as_json:
        return emit_json(rows)
    show(rows)


@click.command("plugins")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@click.pass_context
def plugins_cmd(ctx: click.Context, as_json: bool) -> None:
    """List plugins and their status (= zoo list plugins)."""
    ctx.invoke(list_cmd, what="plugins", kind=None, as_json=as_json)


@click.command("show")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of YAML/text.")
def show_cmd(name: str, as_json: bool) -> None:
    """Show a model's resolved spec or a component's parameters."""
    if Path(name).exists() or ("/" in name and ":" not in name):  # a path or a Hub id
        spec = resolve(name, spec_only=True).spec()
        return emit_json(spec.to_dict()) if as_json else click.echo(spec.to_yaml(), nl=False)
    texts = cached(f"show:{name}", lambda: zoo_spec_texts(name))
    if texts is not None:
        return emit_json(texts["json"]) if as_json else click.echo(texts["yaml"], nl=False)
    cls = find_component(name)
    if cls is None:
        raise unknown_name(name)
    plugin = archzoo.get_registry().plugin_of(cls.kind, cls.name)
    if as_json:
        return emit_json({**cls.describe(), "plugin": plugin})
    print_component(cls, plugin)
