"""The `zoo` command starts without torch: lazy `archzoo`, lazy commands, a checked cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

import archzoo
from archzoo.cli import cache
from archzoo.cli.main import COMMANDS, main

# runs `zoo ARGS` in a fresh interpreter, then reports whether torch was imported
PROBE = """\
import json, sys
from archzoo.cli.main import main
try:
    main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
print(json.dumps({"torch": "torch" in sys.modules, "code": code}), file=sys.stderr)
"""


def zoo(*args: str, env: dict | None = None) -> tuple[str, dict]:
    """stdout of `zoo ARGS` in a fresh process, and {torch: imported?, code: exit code}."""
    run = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **(env or {})},
    )
    return run.stdout, json.loads(run.stderr.strip().splitlines()[-1])


@pytest.mark.parametrize("command", [None, *sorted(COMMANDS)])
def test_help_does_not_import_torch(command):
    out, probe = zoo(*([command] if command else []), "--help")
    assert probe == {"torch": False, "code": 0}
    assert out.startswith("Usage:")


def test_version_does_not_import_torch():
    out, probe = zoo("--version")
    assert probe == {"torch": False, "code": 0} and archzoo.__version__ in out


def test_help_lists_the_same_text_as_the_loaded_commands():
    lazy = CliRunner().invoke(main, ["--help"]).output
    for name, (_, _, summary) in COMMANDS.items():
        command = main.get_command(None, name)  # loads it
        assert summary == command.help.split("\n\n")[0].strip(), name
    assert CliRunner().invoke(main, ["--help"]).output == lazy


def test_import_archzoo_is_lazy_and_every_public_name_resolves():
    code = (
        "import sys, archzoo\n"
        "assert 'torch' not in sys.modules\n"
        "assert set(archzoo.__all__) <= set(dir(archzoo))\n"
        "from archzoo import *\n"
        "assert 'torch' in sys.modules and callable(build_model) and Spec is archzoo.Spec\n"
        "assert archzoo.build_model('gpt2', device='meta').num_parameters() == 124439808\n"
        "assert 'gpt2' in archzoo.specs.spec.list_models() and archzoo.parts.masks.AttentionMask\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        archzoo.nope  # noqa: B018


def test_cached_list_and_show_equal_the_computed_ones_and_skip_torch(tmp_path):
    env = {cache.CACHE_DIR_ENV: str(tmp_path)}
    runner = CliRunner()  # in this process the registry is loaded: never cached
    for args in (["list", "models"], ["show", "gpt2"]):
        first, cold = zoo(*args, env=env)
        second, warm = zoo(*args, env=env)
        assert cold == {"torch": True, "code": 0} and warm == {"torch": False, "code": 0}
        assert first == second == runner.invoke(main, args).output, args
    out, warm = zoo("list", "models", "--json", env=env)
    assert warm["torch"] is False
    assert out == runner.invoke(main, ["list", "models", "--json"]).output
    out, warm = zoo("show", "gpt2", "--json", env=env)
    assert warm["torch"] is False
    assert json.loads(out) == json.loads(runner.invoke(main, ["show", "gpt2", "--json"]).output)
    assert "torch" in zoo("show", "mha", env=env)[1] and "mha" in zoo("show", "mha", env=env)[0]


def test_cache_is_read_only_while_its_fingerprint_holds(tmp_path):
    env = {cache.CACHE_DIR_ENV: str(tmp_path)}
    zoo("list", "models", "--json", env=env)
    path = tmp_path / "cli.json"
    data = json.loads(path.read_text())
    data["entries"]["models"][0]["family"] = "MARKED"
    path.write_text(json.dumps(data))
    assert json.loads(zoo("list", "models", "--json", env=env)[0])[0]["family"] == "MARKED"
    # a different plugin selection changes the fingerprint: computed afresh
    changed = {**env, cache.DISABLE_ENV: "some-plugin"}
    out, probe = zoo("list", "models", "--json", env=changed)
    assert probe["torch"] and json.loads(out)[0]["family"] != "MARKED"
    path.write_text("{not json")  # a corrupt cache is ignored and replaced
    out, probe = zoo("list", "models", "--json", env=env)
    assert probe["torch"] and json.loads(out)[0]["family"] != "MARKED"
    assert json.loads(path.read_text())["format"] == cache.FORMAT
    path.unlink()
    zoo("list", "models", env={**env, cache.NO_CACHE_ENV: "1"})
    assert not path.exists()


def test_fingerprint_follows_file_edits_additions_and_zoo_dirs(tmp_path):
    zoo_dir = tmp_path / "zoo"
    zoo_dir.mkdir()
    spec = zoo_dir / "a.yaml"
    spec.write_text("name: a\n")
    base = cache.fingerprint([str(zoo_dir)])
    assert base == cache.fingerprint([str(zoo_dir)]) and base is not None
    spec.write_text("name: ab\n")  # size changes
    edited = cache.fingerprint([str(zoo_dir)])
    (zoo_dir / "b.yaml").write_text("name: b\n")
    added = cache.fingerprint([str(zoo_dir)])
    os.utime(spec, ns=(1, 1))  # same size, other mtime
    touched = cache.fingerprint([str(zoo_dir)])
    assert len({base, edited, added, touched}) == 4
    assert cache.fingerprint([]) not in {base, edited, added, touched}
