"""Spec errors point at the text the user wrote: their file and line, or the override, and
the packaged base spec only for a key that comes from it (issue 30, item 3)."""

from __future__ import annotations

import textwrap

import pytest
from click.testing import CliRunner

import archzoo
from archzoo.cli.main import main
from archzoo.specs.spec import find_model

GPT2 = str(find_model("gpt2").resolve())


def zoo_error(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 2, result.output
    return result.output.strip()


def child(tmp_path, text: str):
    path = tmp_path / "mine.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def test_bare_component_typo_in_a_child_names_the_child_line(tmp_path):
    path = child(tmp_path, "name: mine\nextends: gpt2\nn_layers: 2\nnorm: scalenorn\n")
    err = zoo_error("validate", str(path))
    assert err == (
        f"Error: {path}:4:1: norm.kind: unknown norm component 'scalenorn'; "
        "known: affine, layernorm, rmsnorm"
    )
    assert GPT2 not in err


def test_component_mapping_of_another_kind_names_the_child(tmp_path):
    path = child(tmp_path, "name: mine\nextends: gpt2\nattention:\n  kind: local\n  windw: 8\n")
    err = zoo_error("validate", str(path))
    assert err.startswith(f"Error: {path}:5:3: attention.windw: unknown parameter of attention")
    assert GPT2 not in err


def test_a_parameter_merged_into_the_base_component_names_the_child(tmp_path):
    path = child(tmp_path, "name: mine\nextends: gpt2\nnorm: {eps: -1.0}\n")
    assert zoo_error("validate", str(path)) == (
        f"Error: {path}:3:8: norm.eps: must be > 0.0, got -1.0"
    )


def test_set_of_a_bare_component_names_the_override():
    err = zoo_error("build", "gpt2", "--set", "norm=scalenorn")
    assert err == (
        "Error: <override norm>:1:1: norm.kind: unknown norm component 'scalenorn'; "
        "known: affine, layernorm, rmsnorm"
    )


def test_set_over_a_child_names_the_override_not_the_child(tmp_path):
    path = child(tmp_path, "name: mine\nextends: gpt2\nnorm: {kind: rmsnorm, eps: 1.0e-6}\n")
    err = zoo_error("build", str(path), "--set", "norm={kind: layernorm, epz: 1.0}")
    assert err.startswith("Error: <override norm>:1:1: norm.epz: unknown parameter of norm")


def test_python_overrides_are_located_the_same_way():
    with pytest.raises(archzoo.SpecError) as info:
        archzoo.load_spec("gpt2", {"position": "rotery"})
    assert str(info.value).startswith("<override position>:1:1: position.kind: unknown position")


def test_a_clash_of_a_user_key_and_a_base_key_names_the_user_key(tmp_path):
    # d_model is the child's, n_heads (12) the base's: the child's line is named
    path = child(tmp_path, "name: mine\nextends: gpt2\nd_model: 100\n")
    msg = "d_model 100 is not divisible by n_heads 12 (set head_dim to decouple them)"
    assert zoo_error("validate", str(path)) == f"Error: {path}:3:1: d_model: {msg}"
    assert zoo_error("validate", "gpt2", "--set", "d_model=100") == (
        f"Error: <override d_model>:1:1: d_model: {msg}"
    )


def test_a_key_left_to_the_base_is_located_in_the_base(tmp_path):
    spec = archzoo.load_spec("name: mine\nextends: gpt2\nnorm: {eps: 1.0e-6}\n")
    assert str(spec.locs[("norm", "eps")]) == "<text>:3:8"  # the child's
    kind = spec.locs[("norm", "kind")]  # the base's, untouched by the child
    assert (kind.file, kind.line) == (GPT2, 15)
    spec = archzoo.load_spec("name: mine\nextends: gpt2\nnorm: rmsnorm\n")
    assert str(spec.locs[("norm", "kind")]) == "<text>:3:1"
    assert ("norm", "eps") not in spec.locs  # replaced by rmsnorm's own default
