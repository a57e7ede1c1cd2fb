"""The `zoo` command: list components, models and plugins; show, build and validate specs.

Each command lives in its own module and is imported only when it runs (or when --help
lists it); the shared helpers are in `common`, which imports no command.
"""

from __future__ import annotations

import importlib
from typing import Any

import click

import archzoo
from archzoo.errors import printable

from .common import UserError, user_errors

# command name -> (module of this package, attribute): loaded on first use
COMMANDS = {
    "attn": ("attn", "attn_cmd"),
    "build": ("build", "build_cmd"),
    "compare": ("compare", "compare_cmd"),
    "diff": ("diff", "diff_cmd"),
    "generate": ("generate", "generate_cmd"),
    "import": ("convert", "import_cmd"),
    "list": ("listing", "list_cmd"),
    "mask": ("mask", "mask"),
    "plugins": ("listing", "plugins_cmd"),
    "show": ("listing", "show_cmd"),
    "train": ("train", "train_cmd"),
    "validate": ("build", "validate_cmd"),
}


class ZooGroup(click.Group):
    """Loads commands lazily and turns user errors into short messages unless --debug."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *COMMANDS})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in COMMANDS and name not in self.commands:
            module, attr = COMMANDS[name]
            command = getattr(importlib.import_module(f".{module}", __package__), attr)
            self.add_command(command, name)
        return super().get_command(ctx, name)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (BrokenPipeError, click.ClickException, click.exceptions.Exit, click.Abort):
            raise  # `zoo ... | head` exits quietly; click reports its own errors
        except Exception as exc:
            if ctx.params.get("debug") or not isinstance(exc, user_errors()):
                raise
            raise UserError(printable(str(exc))) from None  # text from files reaches here


@click.group(cls=ZooGroup)
@click.option("--debug", is_flag=True, help="Show tracebacks instead of short error messages.")
@click.version_option(archzoo.__version__, prog_name="zoo")
def main(debug: bool) -> None:
    """archzoo: transformer architectures from YAML specs and plugins."""
