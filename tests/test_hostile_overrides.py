"""Hostile input, round 3, category 7: the `--set` parser and numbers.

A `--set` value is read under the spec loader's guards (nodes, aliases, depth, size), so a
bomb is a SpecError naming the key, not a MemoryError or RecursionError. Exponent notation
(`1e-6`, a string in YAML 1.1) is the number it spells in a numeric field, in `--set`
and in spec files alike; a string field keeps it as text. An integer past Python's
int-to-text limit, or past 64 bits, is refused naming the field.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from hostile_util import zoo_fails

import archzoo
from archzoo.cli.main import main
from archzoo.specs.spec import parse_override

BASE = """\
name: tiny
family: decoder
vocab_size: 64
d_model: 16
n_layers: 1
n_heads: 2
max_len: 32
norm: {kind: layernorm, eps: 1.0e-5}
"""

# nine aliases of nine aliases ... : 9**7 = 4.8M nodes when expanded, 70 written
ALIAS_BOMB = "{a: &a [x,x,x,x,x,x,x,x,x]" + "".join(
    f", {n}: &{n} [{', '.join([f'*{p}'] * 9)}]" for p, n in zip("abcdef", "bcdefg", strict=True)
)
ALIAS_BOMB += ", h: [" + ", ".join(["*g"] * 9) + "]}"
DEEP = "[" * 100_000  # deeper than Python recurses; unclosed, so it fits in one argv string
DIGITS = "9" * 5000  # past Python's 4300-digit int-to-text limit


def overrides(*sets: str) -> dict:
    return dict(parse_override(s) for s in sets)


def spec_error(source, sets=(), api=None) -> str:
    with pytest.raises(archzoo.SpecError) as err:
        archzoo.load_spec(source, api if api is not None else overrides(*sets))
    return str(err.value)


# ---------------------------------------------------------------- guards on --set values


@pytest.mark.parametrize(
    "value, words",
    [
        (ALIAS_BOMB, ["<override norm.eps>", "norm.eps", "expands to more than 100000 nodes"]),
        (DEEP, ["<override norm.eps>:1:101", "norm.eps", "nests too deeply: more than 100"]),
        ("[" + ", ".join(["1"] * 20_000) + "]", ["norm.eps", "more than 10000 nodes"]),
        ("x" * 1_000_001, ["norm.eps", "longer than 1000000 characters"]),
    ],
    ids=["alias-bomb", "deep-nesting", "many-nodes", "huge-text"],
)
def test_set_value_is_read_under_the_spec_loaders_guards(value, words):
    with pytest.raises(archzoo.SpecError) as err:
        parse_override(f"norm.eps={value}")
    for word in words:
        assert word in str(err.value), (word, str(err.value)[:300])


@pytest.mark.parametrize("value", [ALIAS_BOMB, DEEP], ids=["alias-bomb", "deep-nesting"])
def test_set_bomb_through_the_cli(value, tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(BASE)
    zoo_fails(["build", path, "--set", f"norm.eps={value}"], "norm.eps", "<override norm.eps>")
    assert path.read_text() == BASE


def test_set_text_that_is_not_yaml_stays_a_string():
    """The fallback of `--set` for text YAML cannot parse: the text itself, as before."""
    assert parse_override("name=a: b: c") == ("name", "a: b: c")
    assert parse_override("name=@x") == ("name", "@x")
    assert parse_override("name=") == ("name", None)


# ---------------------------------------------------------------- exponent notation


@pytest.mark.parametrize(
    "text, expected",
    [("1e-6", 1e-6), ("1E-6", 1e-6), ("+2.5e-3", 2.5e-3), ("1.0e5", 1e5), (".5e-2", 0.005)],
)
def test_set_exponent_notation_is_a_float_in_a_float_field(text, expected):
    spec = archzoo.load_spec(BASE, overrides(f"norm.eps={text}"))
    assert spec.data["norm"]["eps"] == expected
    assert type(spec.data["norm"]["eps"]) is float


def test_exponent_notation_in_a_spec_file(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(
        BASE.replace("eps: 1.0e-5", "eps: 1e-6") + "dropout: 5e-2\nd_ff: 1e2\nmax_len: 3.2e1\n"
    )
    path.write_text(path.read_text().replace("max_len: 32\n", ""))
    spec = archzoo.load_spec(path)
    assert (spec.data["norm"]["eps"], spec.data["dropout"]) == (1e-6, 0.05)
    assert (spec.data["d_ff"], spec.data["max_len"]) == (100, 32)
    assert type(spec.data["d_ff"]) is int and type(spec.data["max_len"]) is int
    assert archzoo.load_spec(spec.to_yaml()) == spec  # the resolved spec rebuilds the same


def test_exponent_notation_through_the_cli():
    result = CliRunner().invoke(main, ["diff", "gpt2", "--set", "norm.eps=1e-6", "--json"])
    assert result.exit_code == 0, result.output
    change = json.loads(result.output)["stacks"]["decoder"]["layers"]["norm"][0]["change"]
    assert change["params"]["eps"] == [1e-5, 1e-6]


@pytest.mark.parametrize(
    "sets, words",
    [
        (["n_layers=1e-1"], ["n_layers", "must be an integer, got str '1e-1'"]),
        (["n_layers=1.5e0"], ["n_layers", "must be an integer, got str '1.5e0'"]),
        (["d_ff=1e30"], ["d_ff", "must be an integer, got str '1e30'"]),
        (["norm.eps=1e999"], ["norm.eps", "must be a finite number, got inf"]),
        (["dropout=-1e-1"], ["dropout", "must be >= 0.0, got -0.1"]),
    ],
    ids=["int-fraction", "int-not-whole", "int-past-64-bits", "float-overflow", "range"],
)
def test_exponent_notation_that_does_not_fit_is_refused(sets, words):
    msg = spec_error(BASE, sets)
    for word in words:
        assert word in msg, (word, msg)


def test_exponent_text_in_a_string_field_is_kept_as_text():
    assert archzoo.load_spec(BASE, overrides("name=1e5")).name == "1e5"


# ---------------------------------------------------------------- integers past the limits


def test_set_integer_past_the_text_limit_names_the_field():
    msg = spec_error(BASE, [f"d_model={DIGITS}"])
    assert "<override d_model>" in msg and "d_model: refused YAML value" in msg
    assert "5000 digits" in msg


def test_spec_file_integer_past_the_text_limit_names_the_field(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(BASE.replace("d_model: 16", f"d_model: {DIGITS}"))
    msg = spec_error(path)
    assert f"{path}:4:10: d_model: refused YAML value" in msg


def test_set_integer_past_the_text_limit_through_the_cli():
    zoo_fails(["validate", "gpt2", "--set", f"n_heads={DIGITS}"], "n_heads", "5000 digits")


@pytest.mark.parametrize(
    "api, words",
    [
        (
            {"d_model": 10**5000},
            ["d_model: must be a 64-bit integer, got an integer of 16610 bits"],
        ),
        ({"d_ff": 2**63}, ["d_ff: must be a 64-bit integer, got 9223372036854775808"]),
        ({"norm.eps": 10**5000}, ["norm.eps: must be a finite number, got an integer of"]),
        ({"eos_token_id": [10**5000]}, ["eos_token_id", "too large to print"]),
    ],
    ids=["int-field", "int-64-bits", "float-field", "list-item"],
)
def test_python_integers_past_the_limits_name_the_field(api, words):
    msg = spec_error(BASE, api=api)
    for word in words:
        assert word in msg, (word, msg)
