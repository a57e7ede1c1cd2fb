"""Hostile input, round 3, category 10: a spec named inside a weights file.

The spec in a weights file's metadata is data only. A string there (a path to a local
spec file, a zoo name, YAML text) would be read as a spec source, and `extends:` would
read its base: both are refused, by archzoo.load, by resolve_model(...).spec() (which
`zoo build`, `zoo diff` and the other commands use) and for a run directory alike. No
spec file is read while refusing (a spy on the one function that reads spec files), and
the files involved are byte-identical afterwards.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from hostile_util import TINY, snapshot, zoo_fails
from safetensors import safe_open

import archzoo
import archzoo.specs.sources
from archzoo.io.safe_write import write_safetensors
from archzoo.io.weights import SPEC_KEY
from archzoo.model_source import resolve_model

REFUSED_STRING = "a stored spec is a mapping of spec keys (data, never a name, path or YAML text"
REFUSED_EXTENDS = "saved specs are resolved (a file's spec never reads another)"


@pytest.fixture
def reads(monkeypatch) -> list[Path]:
    """Every spec file archzoo reads from here on (all go through specs/sources.read_text)."""
    seen: list[Path] = []
    real = archzoo.specs.sources.read_text

    def spy(path: Path) -> str:
        seen.append(path)
        return real(path)

    monkeypatch.setattr(archzoo.specs.sources, "read_text", spy)
    return seen


@pytest.fixture
def files(tmp_path) -> dict[str, object]:
    """A good tiny weights file and a user's spec file the hostile ones point at."""
    torch.manual_seed(0)
    model = archzoo.build_model("gpt2", TINY)
    good = tmp_path / "good.safetensors"
    archzoo.save(model, good)
    user_spec = tmp_path / "user.yaml"
    user_spec.write_text(archzoo.load_spec("gpt2", {**TINY, "n_layers": 2}).to_yaml())
    with safe_open(str(good), framework="pt") as f:
        meta, tensors = f.metadata(), {k: f.get_tensor(k) for k in f.keys()}
    return {"dir": tmp_path, "good": good, "user": user_spec, "meta": meta, "tensors": tensors}


def hostile(files, name: str, stored: object) -> Path:
    """A copy of the good file whose metadata spec is `stored` (JSON)."""
    path = files["dir"] / f"{name}.safetensors"
    write_safetensors(path, files["tensors"], {**files["meta"], SPEC_KEY: json.dumps(stored)})
    return path


def stored_cases(files) -> list[tuple[str, object, str]]:
    spec = json.loads(files["meta"][SPEC_KEY])
    user = str(files["user"])
    return [
        ("path", user, REFUSED_STRING),
        ("relative-path", "user.yaml", REFUSED_STRING),
        ("zoo-name", "gpt2", REFUSED_STRING),
        ("yaml-text", f"name: x\nextends: {user}\n", REFUSED_STRING),
        ("extends-path", {**spec, "extends": user}, f"extends={user!r}; {REFUSED_EXTENDS}"),
        ("extends-zoo-name", {**spec, "extends": "gpt2"}, f"extends='gpt2'; {REFUSED_EXTENDS}"),
        ("list", [user], "cannot load a spec from list"),
    ]


CASE_IDS = ["path", "relative-path", "zoo-name", "yaml-text", "extends-path", "extends-zoo", "list"]


@pytest.mark.parametrize("case", range(len(CASE_IDS)), ids=CASE_IDS)
def test_stored_spec_is_data_only(case, files, reads, monkeypatch):
    name, stored, words = stored_cases(files)[case]
    path = hostile(files, name, stored)
    monkeypatch.chdir(files["dir"])  # where a relative path in the file would point
    before = snapshot(files["dir"])
    for call in (lambda: archzoo.load(path), lambda: resolve_model(str(path)).spec()):
        with pytest.raises(archzoo.WeightsError) as err:
            call()
        msg = str(err.value)
        assert f"{path}: the spec stored in the file does not validate" in msg, msg
        assert words in msg, msg
        assert "n_layers: 2" not in msg  # nothing of the user's file shows
    assert reads == []  # no spec file was opened
    assert snapshot(files["dir"]) == before


def test_stored_spec_in_a_run_directory_is_data_only(files, reads):
    run = files["dir"] / "run"
    run.mkdir()
    (run / "model.safetensors").write_bytes(hostile(files, "x", str(files["user"])).read_bytes())
    with pytest.raises(archzoo.WeightsError, match="a stored spec is a mapping"):
        resolve_model(str(run)).load()
    with pytest.raises(archzoo.WeightsError, match="a stored spec is a mapping"):
        resolve_model(str(run)).spec()
    assert reads == []


@pytest.mark.parametrize("command", [["build"], ["diff", "--set", "n_layers=3"], ["show"]])
def test_stored_spec_through_the_cli(command, files, reads):
    path = hostile(files, "path", str(files["user"]))
    before = snapshot(files["dir"])
    zoo_fails([command[0], path, *command[1:]], str(path), REFUSED_STRING)
    assert reads == []
    assert snapshot(files["dir"]) == before


def test_a_good_stored_spec_still_loads_the_same_model(files, reads):
    model = archzoo.load(files["good"])
    assert model.spec == resolve_model(str(files["good"])).spec()
    assert model.spec.data["n_layers"] == TINY["n_layers"]
    assert reads == []  # (building from the zoo name below reads zoo/gpt2.yaml)
    ids = torch.tensor([[1, 2, 3]])
    torch.manual_seed(0)
    again = archzoo.build_model("gpt2", TINY).eval()
    assert torch.equal(model(ids).logits, again(ids).logits)
