"""Hostile input, round 3, category 9: what a third-party plugin does while it loads and runs.

Real `zoo` processes, with throwaway plugin packages found by entry point (a module and
its `.dist-info` on PYTHONPATH, nothing installed):
- a plugin that prints at import (through print and through file descriptor 1) leaves
  `zoo build --json` one JSON document on stdout: its output goes to stderr;
- a plugin that hangs at import is named on stderr after a few seconds, with the ways to
  skip it; `zoo --no-plugins` and ARCHZOO_NO_PLUGINS=1 skip it (built-ins still load);
- a plugin component that returns the wrong shape is named, with its plugin, at the first
  forward, instead of a bare matmul error; the check is gone after that forward.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
from torch import nn

import archzoo
from archzoo import hookimpl
from archzoo.model.output_shapes import ComponentOutputError
from archzoo.parts.interfaces import FeedForward

TINY = {"n_layers": 1, "d_model": 16, "n_heads": 2, "d_ff": 32, "vocab_size": 64, "max_len": 32}
TINY_SETS = [a for k, v in TINY.items() for a in ("--set", f"{k}={v}")]
ZOO = "import sys; from archzoo.cli.main import main; sys.exit(main(prog_name='zoo'))"

PRINTS = """\
import os
print("plugin says hello at import")
os.write(1, b"plugin writes to fd 1\\n")
from archzoo import hookimpl

@hookimpl
def archzoo_register(registrar):
    print("plugin says hello from its hook")
"""

HANGS = """\
import time
time.sleep(600)  # a plugin stuck at import (a network call, a lock)
"""

WIDE = """\
from torch import nn
from archzoo import hookimpl
from archzoo.parts.interfaces import FeedForward

class WideFFN(FeedForward, name="wide"):
    \"\"\"returns twice the model width (a broken plugin)\"\"\"

    class Config:
        pass

    def __init__(self, cfg, dims):
        super().__init__(cfg, dims)
        self.fc = nn.Linear(dims.d_model, 2 * dims.d_model)

    def forward(self, x):
        return self.fc(x)  # (B, T, 2 * d_model): wrong

@hookimpl
def archzoo_register(registrar):
    registrar.add_component(WideFFN)
"""


def plugin_site(where: Path, **modules: str) -> Path:
    """A directory for PYTHONPATH with each module and a distribution whose `archzoo` entry
    point names it, as `pip install` would leave them."""
    where.mkdir(parents=True, exist_ok=True)
    for name, body in modules.items():
        (where / f"{name}.py").write_text(body)
        info = where / f"{name}-0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
        (info / "entry_points.txt").write_text(f"[archzoo]\n{name} = {name}\n")
    return where


def env_with(site: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARCHZOO_")}
    path = os.pathsep.join(p for p in (str(site), env.get("PYTHONPATH")) if p)
    return {**env, "PYTHONPATH": path, "ARCHZOO_NO_CACHE": "1", **extra}


def zoo(site: Path, *args: str, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", ZOO, *args],
        capture_output=True,
        text=True,
        timeout=90,
        env=env_with(site, **extra),
    )


def test_plugin_output_at_import_goes_to_stderr(tmp_path):
    site = plugin_site(tmp_path / "site", prints=PRINTS)
    run = zoo(site, "build", "gpt2", *TINY_SETS, "--json")
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)  # one JSON document, nothing else
    assert report["dims"]["decoder"]["d_model"] == 16
    assert "plugin says hello at import" in run.stderr
    assert "plugin writes to fd 1" in run.stderr
    assert "plugin says hello from its hook" in run.stderr


def test_a_hanging_plugin_is_named_on_stderr(tmp_path):
    site = plugin_site(tmp_path / "site", hangs=HANGS)
    proc = subprocess.Popen(
        [sys.executable, "-c", ZOO, "build", "gpt2", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env_with(site),
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stderr], daemon=True).start()
    note, deadline = "", time.monotonic() + 60  # the process itself never ends
    try:
        while "still loading plugin" not in note and time.monotonic() < deadline:
            with contextlib.suppress(queue.Empty):
                note = lines.get(timeout=1)
    finally:
        proc.kill()
        proc.wait()
    assert "archzoo: still loading plugin 'hangs' (hangs) after 3 s" in note, note
    assert "ARCHZOO_DISABLE_PLUGINS=hangs" in note
    assert "`zoo --no-plugins` or ARCHZOO_NO_PLUGINS=1" in note
    assert proc.stdout.read() == ""


def test_no_plugins_environment_skips_third_party_plugins(tmp_path):
    site = plugin_site(tmp_path / "site", hangs=HANGS)
    run = zoo(site, "plugins", "--json", ARCHZOO_NO_PLUGINS="1")
    assert run.returncode == 0, run.stderr
    plugins = {p["name"]: p for p in json.loads(run.stdout)}
    assert plugins["builtins"]["status"] == "ok"
    assert plugins["hangs"]["status"] == "disabled"
    assert "ARCHZOO_NO_PLUGINS=1" in plugins["hangs"]["error"]


def test_no_plugins_option_skips_third_party_plugins(tmp_path):
    site = plugin_site(tmp_path / "site", hangs=HANGS)
    run = zoo(site, "--no-plugins", "build", "gpt2", *TINY_SETS, "--json")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["dims"]["decoder"]["n_layers"] == 1
    assert "still loading" not in run.stderr


def test_a_component_of_the_wrong_shape_names_itself_and_its_plugin(tmp_path):
    site = plugin_site(tmp_path / "site", wideplug=WIDE)
    code = (
        "import torch, archzoo\n"
        f"model = archzoo.build_model('gpt2', {{**{TINY!r}, 'ffn': 'wide'}})\n"
        "model(torch.tensor([[1, 2, 3]]))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=90, env=env_with(site)
    )
    assert run.returncode == 1
    last = run.stderr.strip().splitlines()[-1]
    assert last == (
        "archzoo.model.output_shapes.ComponentOutputError: ffn component 'wide' of plugin 'wideplug' "
        "(at decoder.blocks.0.ffn) returned torch.float32 of shape (1, 3, 32) for an input of "
        "shape (1, 3, 16); an ffn component must return a tensor of the shape it is given"
    )


# ---------------------------------------------------------------- in process: the check's cost


class ScaledFFN(FeedForward, name="scaled_test_ffn"):
    """2 * a linear map (a well-behaved test plugin)"""

    class Config:
        pass

    def __init__(self, cfg, dims):
        super().__init__(cfg, dims)
        self.fc = nn.Linear(dims.d_model, dims.d_model)

    def forward(self, x):
        return 2 * self.fc(x)


class ScaledPlugin:
    @hookimpl
    def archzoo_register(self, registrar):
        registrar.add_component(ScaledFFN)


@pytest.fixture
def scaled_plugin():
    registry = archzoo.get_registry()
    registry.register_plugin(ScaledPlugin(), "scaled_test")
    yield
    registry.unregister_plugin("scaled_test")


def hooks(model: nn.Module) -> int:
    return sum(len(m._forward_hooks) for m in model.modules())


def test_shape_check_runs_once_and_changes_nothing(scaled_plugin):
    torch.manual_seed(0)
    model = archzoo.build_model("gpt2", {**TINY, "ffn": "scaled_test_ffn"}).eval()
    twin = copy.deepcopy(model)
    assert hooks(model) == 2  # the plugin FFN's check, and the hook that removes it
    ids = torch.tensor([[1, 2, 3, 4]])
    first = model(ids).logits
    assert hooks(model) == 0  # every later forward and decoding step runs without hooks
    assert torch.equal(model(ids).logits, first)  # checked or not: the same numbers
    assert hooks(twin) == 2  # a deep copy keeps its own checks, removed by its own forward
    assert torch.equal(twin(ids).logits, first) and hooks(twin) == 0


def test_builtin_models_get_no_check():
    model = archzoo.build_model("gpt2", TINY)
    assert hooks(model) == 0


def test_wrong_shape_in_process_is_a_named_error():
    from archzoo.parts.registry import get_registry

    class Wide(FeedForward, name="wide_test_ffn"):
        """twice the width"""

        class Config:
            pass

        def __init__(self, cfg, dims):
            super().__init__(cfg, dims)
            self.fc = nn.Linear(dims.d_model, 2 * dims.d_model)

        def forward(self, x):
            return self.fc(x)

    class Plugin:
        @hookimpl
        def archzoo_register(self, registrar):
            registrar.add_component(Wide)

    registry = get_registry()
    registry.register_plugin(Plugin(), "wide_test")
    try:
        model = archzoo.build_model("gpt2", {**TINY, "ffn": "wide_test_ffn"})
        with pytest.raises(ComponentOutputError) as err:
            model(torch.tensor([[1, 2]]))
        assert "ffn component 'wide_test_ffn' of plugin 'wide_test'" in str(err.value)
        assert hooks(model) == 2  # a forward that failed leaves the checks armed
    finally:
        registry.unregister_plugin("wide_test")


def test_no_plugins_in_process_leaves_the_callers_environment(monkeypatch):
    from click.testing import CliRunner

    from archzoo.cli.main import main

    monkeypatch.delenv("ARCHZOO_NO_PLUGINS", raising=False)
    registry = archzoo.get_registry()
    registry.register_plugin(ScaledPlugin(), "scaled_test")
    try:
        run = CliRunner().invoke(main, ["--no-plugins", "show", "scaled_test_ffn"])
        assert run.exit_code == 2 and "scaled_test_ffn" in run.output  # not registered there
    finally:
        registry.unregister_plugin("scaled_test")
    assert "ARCHZOO_NO_PLUGINS" not in os.environ
    assert archzoo.get_registry() is not registry  # the next use reloads every plugin
