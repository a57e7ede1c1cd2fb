"""A plugin component that returns the wrong shape is named at the model's first forward.

Attention, FFN, norm and block components map hidden states to hidden states of the same
shape. A third-party one that does not would otherwise fail a few ops later with a bare
matmul or broadcast error naming nothing. `check_first_forward` puts a shape check on
each third-party component of those kinds; the first forward that completes removes
them all, so later forwards (and every decoding step) run without hooks. Built-in
components are covered by the test suite and get no check.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from ..parts.component import Component
from ..parts.input_checks import describe

SAME_SHAPE_KINDS = ("attention", "ffn", "norm", "block")
ARTICLE = {"attention": "an", "ffn": "an", "norm": "a", "block": "a"}


class ComponentOutputError(ValueError):
    """A component returned something other than a tensor of its input's shape."""


class _OutputShapeCheck:
    """Forward hook: the output is a tensor of the shape of the first input."""

    def __init__(self, where: str, kind: str, name: str, plugin: str) -> None:
        self.where, self.kind, self.name, self.plugin = where, kind, name, plugin
        self.handle: Any = None

    def __call__(self, module: nn.Module, args: tuple, output: Any) -> None:
        if torch.compiler.is_compiling() or not args or not isinstance(args[0], Tensor):
            return
        if isinstance(output, Tensor) and output.shape == args[0].shape:
            return
        raise ComponentOutputError(
            f"{self.kind} component {self.name!r} of plugin {self.plugin!r} (at {self.where}) "
            f"returned {describe(output)} for an input of shape {tuple(args[0].shape)}; "
            f"{ARTICLE[self.kind]} {self.kind} component must return a tensor of the shape it is given"
        )


def check_first_forward(model: nn.Module, plugin_of: Any) -> None:
    """Check the output shapes of `model`'s third-party components at its first forward;
    `plugin_of(kind, name)` names the plugin of a component."""
    checks = []
    for where, module in model.named_modules():
        if not isinstance(module, Component) or module.kind not in SAME_SHAPE_KINDS:
            continue
        try:
            plugin = plugin_of(module.kind, module.name)
        except KeyError:  # a part a component made itself, not through the registry
            continue
        if plugin == "builtins":
            continue
        check = _OutputShapeCheck(where, module.kind, module.name, plugin)
        check.handle = module.register_forward_hook(check)
        checks.append(check)
    if checks:
        done = model.register_forward_hook(_remove_checks)
        model._first_forward_checks = [*(c.handle for c in checks), done]  # a deepcopy too


def _remove_checks(model: nn.Module, args: tuple, output: Any) -> None:
    """After the first forward that completed: every check, and this hook, off the model
    (not while torch.compile traces: the checks skip themselves there)."""
    if torch.compiler.is_compiling():
        return
    for handle in model.__dict__.pop("_first_forward_checks", ()):
        handle.remove()
