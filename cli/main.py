"""The `zoo` command: list components, models and plugins; show, build and validate specs.

Each command lives in its own module and is imported only when it runs (or when --help
lists it); the shared helpers are in `common`, which imports no command.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

import click

import archzoo
from archzoo.errors import printable

from .cache import NO_PLUGINS_ENV
from .common import UserError, user_errors

# command name -> (module of this package, attribute, first paragraph of its help): the
# module is imported when the command runs; `zoo --help` lists the commands from here
COMMANDS = {
    "attn": (
        "attn",
        "attn_cmd",
        "Attention of a model on TEXT: HTML heat maps (query x key) or a PNG grid.",
    ),
    "build": (
        "build",
        "build_cmd",
        "Build a model and print its parameter counts and costs (no weights unless --out).",
    ),
    "compare": (
        "compare",
        "compare_cmd",
        "Train specs under identical data order and seeds; print a table, write results and a "
        "plot.",
    ),
    "diff": (
        "diff",
        "diff_cmd",
        "What changes from spec/model A to B (B defaults to A; --set overrides apply to B).",
    ),
    "eval": (
        "eval",
        "eval_cmd",
        "Evaluate a model with lm-evaluation-harness tasks (the `eval` extra).",
    ),
    "export": (
        "export",
        "export_cmd",
        "Export a model to an HF directory, after transformers loaded it and matched archzoo.",
    ),
    "generate": (
        "generate",
        "generate_cmd",
        "Generate a continuation of PROMPT, printing text as it is produced.",
    ),
    "import": (
        "convert",
        "import_cmd",
        "Import an HF checkpoint (config.json + safetensors); print its spec and summary.",
    ),
    "list": (
        "listing",
        "list_cmd",
        "List registered components (default), zoo models, plugins or hf-types (coverage).",
    ),
    "mask": (
        "mask",
        "mask",
        "Show which keys each query of a layer may attend to (NAME: zoo name or spec file).",
    ),
    "plugins": ("listing", "plugins_cmd", "List plugins and their status (= zoo list plugins)."),
    "show": ("listing", "show_cmd", "Show a model's resolved spec or a component's parameters."),
    "train": (
        "train",
        "train_cmd",
        "Train a model: causal LM (decoders), MLM (encoders), denoising or pairs "
        "(encoder-decoders).",
    ),
    "validate": ("build", "validate_cmd", "Check a spec file and report every problem."),
}


class ZooGroup(click.Group):
    """Loads commands lazily and turns user errors into short messages unless --debug."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *COMMANDS})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in COMMANDS and name not in self.commands:
            module, attr, _ = COMMANDS[name]
            command = getattr(importlib.import_module(f".{module}", __package__), attr)
            self.add_command(command, name)
        return super().get_command(ctx, name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list of `zoo --help`, without importing the commands not yet loaded."""
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(map(len, names))
        rows = []
        for name in names:
            if name in self.commands:
                if not self.commands[name].hidden:
                    rows.append((name, self.commands[name].get_short_help_str(limit)))
            else:
                stub = click.Command(name, help=COMMANDS[name][2])  # the same truncation
                rows.append((name, stub.get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (BrokenPipeError, click.ClickException, click.exceptions.Exit, click.Abort):
            raise  # `zoo ... | head` exits quietly; click reports its own errors
        except Exception as exc:
            if ctx.params.get("debug") or not isinstance(exc, user_errors()):
                raise
            raise UserError(printable(str(exc))) from None  # text from files reaches here


@click.group(cls=ZooGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show tracebacks instead of short error messages.")
@click.option(
    "--no-plugins",
    is_flag=True,
    help=f"Skip third-party plugins (built-ins load); the same as {NO_PLUGINS_ENV}=1.",
)
@click.version_option(archzoo.__version__, prog_name="zoo")
def main(debug: bool, no_plugins: bool) -> None:
    """archzoo: transformer architectures from YAML specs and plugins."""
    if no_plugins:  # in the environment: read by the registry, and by worker processes
        before = os.environ.get(NO_PLUGINS_ENV)
        os.environ[NO_PLUGINS_ENV] = "1"
        _reset_registry()  # loaded already by an in-process caller: reloaded without plugins
        click.get_current_context().call_on_close(lambda: _restore(before))


def _reset_registry() -> None:
    registry = sys.modules.get("archzoo.parts.registry")  # not imported for it: torch comes with it
    if registry is not None:
        registry.reset_registry()


def _restore(before: str | None) -> None:
    """After `zoo --no-plugins CMD` called in process: the caller's environment and plugins."""
    if before is None:
        os.environ.pop(NO_PLUGINS_ENV, None)
    else:
        os.environ[NO_PLUGINS_ENV] = before
    _reset_registry()
