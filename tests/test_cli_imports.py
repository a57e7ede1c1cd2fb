"""cli/ is layered: shared helpers in `common`, commands on top, and no import cycle."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

CLI = Path(__file__).resolve().parents[1] / "cli"
MODULES = sorted(p.stem for p in CLI.glob("*.py") if p.stem != "__main__")


def cli_imports(module: str) -> set[str]:
    """Modules of archzoo.cli that `module` imports anywhere in its file (top level or not)."""
    tree = ast.parse((CLI / f"{module}.py").read_text(encoding="utf-8"))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1:  # from .x import y / from . import x
                names = [node.module] if node.module else [a.name for a in node.names]
            elif node.module and node.module.startswith("archzoo.cli."):
                names = [node.module.removeprefix("archzoo.cli.")]
            elif node.module == "archzoo.cli":
                names = [a.name for a in node.names]
            else:
                names = []
        elif isinstance(node, ast.Import):
            names = [
                a.name.removeprefix("archzoo.cli.")
                for a in node.names
                if a.name.startswith("archzoo.cli.")
            ]
        else:
            continue
        out.update(n.split(".")[0] for n in names if n.split(".")[0] in MODULES)
    return out - {module}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path [a, b, ..., a], or None when the graph is acyclic."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt, [*path, nxt])):
                return found
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node, [node])):
            return found
    return None


def test_cycle_finder_sees_a_cycle_and_a_dag():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_cli_module_graph_is_acyclic_and_common_imports_no_command():
    graph = {m: cli_imports(m) for m in MODULES}
    assert find_cycle(graph) is None, find_cycle(graph)
    assert graph["common"] == set()  # the shared helpers sit below every command
    for module, imported in graph.items():
        if module not in ("main", "__init__"):  # commands take helpers from common, not main
            assert "main" not in imported, f"cli/{module}.py imports cli/main.py"


def test_every_lazy_command_names_a_module_and_attribute_that_exist():
    from archzoo.cli.main import COMMANDS, main

    for name, (module, _attr, _help) in COMMANDS.items():
        assert module in MODULES, name
        assert main.get_command(None, name).name == name


@pytest.mark.parametrize("module", MODULES)
def test_each_cli_module_imports_alone_in_a_fresh_interpreter(module):
    code = f"import archzoo.cli.{module}"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
