"""Third-party plugins as real packages: pip-installed into a fresh venv, found by entry point.

The fresh venv layers over this interpreter's site-packages (torch, archzoo, pip and
setuptools are not reinstalled; a `.pth` file points at them, like --system-site-packages
would for a system Python), and everything runs offline. Into it go the example plugin
from examples/archzoo-plugin-example/ and a throwaway plugin that raises on import.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import site
import subprocess
import sys
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "archzoo-plugin-example"
ZOO = "import sys; from archzoo.cli.main import main; sys.exit(main())"
TINY = ["--set", "n_layers=2"]


def run(python: Path, *args: str, env: dict[str, str] | None = None, timeout: int = 300):
    """Run the venv's python with `args`; return the CompletedProcess (text mode)."""
    full_env = {**os.environ, "PIP_CONFIG_FILE": os.devnull, "PYTHONNOUSERSITE": "1"}
    full_env.pop("ARCHZOO_DISABLE_PLUGINS", None)
    full_env.update(env or {})
    return subprocess.run(
        [str(python), *args], capture_output=True, text=True, env=full_env, timeout=timeout
    )


def zoo(python: Path, *args: str, env: dict[str, str] | None = None):
    """`zoo ARGS` as a command of its own inside the venv."""
    return run(python, "-c", ZOO, *args, env=env)


# Runs several `zoo` commands in one process of the venv (importing torch once), each
# with its own ARCHZOO_DISABLE_PLUGINS and a fresh registry, as a new process would have.
BATCH = """\
import json, os, sys
from click.testing import CliRunner
from archzoo.cli.main import main
from archzoo.parts.registry import reset_registry
out = []
for disable, args in json.loads(sys.argv[1]):
    os.environ.pop("ARCHZOO_DISABLE_PLUGINS", None)
    if disable:
        os.environ["ARCHZOO_DISABLE_PLUGINS"] = disable
    reset_registry()
    r = CliRunner().invoke(main, args)
    out.append({"rc": r.exit_code, "stdout": r.stdout, "stderr": r.stderr})
print(json.dumps(out))
"""


class Ran:
    """What one batched `zoo` command gave."""

    def __init__(self, rc: int, stdout: str, stderr: str) -> None:
        self.returncode, self.stdout, self.stderr = rc, stdout, stderr


def make_venv(where: Path) -> Path:
    """A venv without pip of its own that sees this interpreter's packages; its python."""
    try:
        venv.EnvBuilder(with_pip=False, symlinks=os.name != "nt").create(where)
    except Exception as exc:  # noqa: BLE001 - e.g. no venv module/ensurepip on the platform
        pytest.skip(f"cannot create a virtual environment here: {exc}")
    python = where / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    purelib = run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    if purelib.returncode != 0:
        pytest.skip(f"the new virtual environment does not run: {purelib.stderr}")
    parents = [*site.getsitepackages(), *(p for p in sys.path if p.endswith("site-packages"))]
    lines = [f"import site; site.addsitedir({p!r})" for p in dict.fromkeys(parents)]
    (Path(purelib.stdout.strip()) / "_archzoo_parent_env.pth").write_text("\n".join(lines) + "\n")
    return python


BROKEN_PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "archzoo-broken-plugin"
version = "0.0.1"

[project.entry-points.archzoo]
broken = "archzoo_broken"

[tool.setuptools]
py-modules = ["archzoo_broken"]
"""

BROKEN_MODULE = """\
raise ImportError("archzoo_broken needs the package 'not-installed-anywhere'")
"""


def require_wheel_building_setuptools() -> None:
    """Offline builds need a setuptools that makes wheels by itself (>= 70.1) or `wheel`."""
    try:
        import setuptools
    except ImportError:
        setuptools = None
    version = tuple(int(p) for p in (setuptools.__version__ if setuptools else "0").split(".")[:2])
    has_wheel = importlib.util.find_spec("wheel") is not None
    if version < (70, 1) and not (setuptools and has_wheel):
        pytest.fail(
            "building a plugin offline needs setuptools>=70.1 (or setuptools and wheel) in the "
            f"test environment, found setuptools {setuptools.__version__ if setuptools else None}"
            " without wheel: add 'setuptools>=70.1' to archzoo's test extra"
        )


@pytest.fixture(scope="module")
def python(tmp_path_factory) -> Path:
    """A fresh venv with the example plugin and the broken plugin pip-installed into it."""
    require_wheel_building_setuptools()
    tmp = tmp_path_factory.mktemp("plugin-venv")
    py = make_venv(tmp / "venv")
    # build from copies so the checkout gets no build/ or *.egg-info
    example = tmp / "archzoo-plugin-example"
    junk = shutil.ignore_patterns("build", "*.egg-info", "__pycache__", ".pytest_cache")
    shutil.copytree(EXAMPLE, example, ignore=junk)
    broken = tmp / "archzoo-broken-plugin"
    broken.mkdir()
    (broken / "pyproject.toml").write_text(BROKEN_PYPROJECT)
    (broken / "archzoo_broken.py").write_text(BROKEN_MODULE)
    pip = ("-m", "pip", "install", "--no-index", "--no-deps", "--no-build-isolation")
    result = run(py, *pip, "--disable-pip-version-check", "-q", str(example), str(broken))
    assert result.returncode == 0, result.stdout + result.stderr
    return py


NEEDS_SCALENORM = """\
name: needs-scalenorm
family: decoder
vocab_size: 100
d_model: 32
n_layers: 1
n_heads: 2
norm: scalenorm
"""


@pytest.fixture(scope="module")
def ran(python, tmp_path_factory) -> dict[str, Ran]:
    """The `zoo` commands the tests look at, run in one process of the venv."""
    spec = tmp_path_factory.mktemp("specs") / "needs-scalenorm.yaml"
    spec.write_text(NEEDS_SCALENORM)
    commands = {
        "build": ("", ["build", "talking-heads-gpt", *TINY, "--json"]),
        "plugins": ("", ["plugins"]),
        "plugins-json": ("", ["plugins", "--json"]),
        "plugins-off": ("example, broken", ["plugins", "--json"]),
        "list-off": ("example, broken", ["list"]),
        "build-off": ("example", ["build", str(spec)]),
    }
    result = run(python, "-c", BATCH, json.dumps(list(commands.values())))
    assert result.returncode == 0, result.stderr
    outcomes = dict(zip(commands, json.loads(result.stdout), strict=True))
    return {"spec": str(spec), **{k: Ran(**v) for k, v in outcomes.items()}}


def test_pip_put_the_plugins_in_the_new_venv_only(python):
    code = (
        "import importlib.metadata as m, sys; d = m.distribution('archzoo-plugin-example');"
        "print(str(d.locate_file('')).startswith(sys.prefix), d.version)"
    )
    assert run(python, "-c", code).stdout.split() == ["True", "0.1.0"]
    here = run(Path(sys.executable), "-c", "import archzoo_example")
    assert here.returncode != 0  # the test's own environment is untouched


def test_zoo_list_includes_the_plugin_components(python):
    result = zoo(python, "list")  # a process of its own, as a user runs it
    assert result.returncode == 0, result.stderr
    rows = {tuple(line.split()[:3]) for line in result.stdout.splitlines()}
    assert ("norm", "scalenorm", "example") in rows
    assert ("attention", "talking_heads", "example") in rows
    assert ("attention", "mha", "builtins") in rows  # the broken plugin took nothing down
    assert result.stderr == ""


def test_zoo_build_of_the_plugin_spec(ran):
    assert ran["build"].returncode == 0, ran["build"].stderr
    report = json.loads(ran["build"].stdout)
    assert (report["name"], report["family"]) == ("talking-heads-gpt", "decoder")
    assert report["components"]["decoder"]["attention"] == ["talking_heads"]
    assert report["components"]["decoder"]["norm"] == ["scalenorm"]
    d, ff, h, vocab = 512, 1408, 8, 32000
    per_layer = 4 * d * d + 2 * h * h + 3 * d * ff + 2  # qkv+out, two mixes, SwiGLU, 2 gains
    assert report["params"] == vocab * d + 2 * per_layer + 1  # tied head, final ScaleNorm


def test_zoo_plugins_reports_ok_and_failed_plugins(ran):
    assert ran["plugins"].returncode == 0, ran["plugins"].stderr
    out = ran["plugins"].stdout
    assert "example  [ok]  from archzoo-plugin-example 0.1.0" in out
    assert "registered: norm:scalenorm, attention:talking_heads" in out
    assert "broken  [failed]  from archzoo-broken-plugin 0.0.1" in out
    assert (
        "error: import of 'archzoo_broken' failed: ImportError: archzoo_broken needs "
        "the package 'not-installed-anywhere'" in out
    )
    rows = {r["name"]: r for r in json.loads(ran["plugins-json"].stdout)}
    assert rows["example"]["zoo_dirs"][0].endswith(os.path.join("archzoo_example", "zoo"))
    assert rows["broken"]["status"] == "failed" and rows["builtins"]["status"] == "ok"


def test_disabled_plugins_are_skipped(ran):
    rows = {r["name"]: r for r in json.loads(ran["plugins-off"].stdout)}
    assert rows["example"]["status"] == "disabled"
    assert rows["example"]["error"] == "disabled by ARCHZOO_DISABLE_PLUGINS"
    assert rows["example"]["components"] == []
    assert rows["broken"]["status"] == "disabled"  # never imported, so it cannot fail
    assert ran["list-off"].returncode == 0
    assert "scalenorm" not in ran["list-off"].stdout and "mha" in ran["list-off"].stdout


def test_a_spec_needing_a_missing_plugin_names_the_plugins_and_why(ran):
    result = ran["build-off"]
    assert result.returncode == 2 and "Traceback" not in result.stderr
    err = result.stderr
    assert f"{ran['spec']}:7:1: norm.kind: unknown norm component 'scalenorm'" in err
    assert "example (disabled by ARCHZOO_DISABLE_PLUGINS)" in err
    assert "broken (import of 'archzoo_broken' failed: ImportError:" in err


def test_the_example_package_passes_its_own_tests_when_installed(python, tmp_path):
    tests = tmp_path / "tests"
    shutil.copytree(EXAMPLE / "tests", tests)
    (tests / "conftest.py").unlink()  # no src/ fallback: import the installed package
    result = run(python, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tests))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "11 passed" in result.stdout


def test_a_class_outside_its_kinds_interface_is_refused():
    """A 'norm' that is a Component but not an archzoo.parts.interfaces.Norm fails its plugin."""
    import archzoo
    from archzoo import Registry, hookimpl

    class NotANorm(archzoo.Component):
        kind, name = "norm", "not_a_norm"

    class Plugin:
        @hookimpl
        def archzoo_register(self, registrar):
            registrar.add_component(NotANorm)

    reg = Registry(load_entry_points=False)
    info = reg.register_plugin(Plugin(), "sloppy")
    assert info.status == "failed"
    assert "does not subclass archzoo.parts.interfaces.Norm" in info.error
    assert not reg.has("norm", "not_a_norm") and reg.has("norm", "layernorm")
