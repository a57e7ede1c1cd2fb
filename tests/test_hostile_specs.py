"""Hostile input in specs and overrides: silently wrong values, control text, runaway cost.

Each case asserts the exact outcome: archzoo.SpecError with the words that name the key
and the problem (and `file:line:col` where the text has one); the same through the CLI
exits 2 with `Error:` and no traceback.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from hostile_util import assert_clean_failure, zoo_fails, zoo_subprocess

import archzoo

BASE = """\
name: tiny
family: decoder
vocab_size: 64
d_model: 16
n_layers: 2
n_heads: 2
max_len: 32
position: learned
attention: {kind: mha}
ffn: {kind: mlp, activation: gelu}
head: {kind: lm, tie: true}
"""


def with_lines(*extra: str) -> str:
    return BASE + "".join(f"{line}\n" for line in extra)


def layer(select: str) -> str:
    """A per-layer override (line 12) selecting `select`, written as YAML."""
    return with_lines("layers:", f"  - select: {select}", "    ffn: {kind: glu}")


# id, spec text, words the error must contain (the key path and what is wrong)
# fmt: off
SPEC_CASES = [
    # 5. silently wrong: layer selections
    ("select-quoted-number", layer("'1'"), ["13:5", "layers[0].select", "'1' is a string but not 'all'"]),
    ("select-quoted-zero", layer('"0"'), ["layers[0].select", "'0' is a string"]),
    ("select-empty-string", layer("''"), ["layers[0].select", "got ''"]),
    ("select-blank-string", layer("'   '"), ["layers[0].select", "got '   '"]),
    ("select-null", layer("null"), ["layers[0].select", "got None"]),
    ("select-true", layer("true"), ["layers[0].select", "true/false is not a layer index"]),
    ("select-false", layer("false"), ["layers[0].select", "true/false is not a layer index"]),
    ("select-bool-in-list", layer("[0, true]"), ["layers[0].select", "true/false is not a layer index"]),
    ("select-float", layer("1.0"), ["layers[0].select", "got 1.0"]),
    ("select-strings-in-list", layer("['0', '1']"), ["layers[0].select", "layer indices must be integers"]),
    ("select-misspelt-all", layer("al"), ["layers[0].select", "'al' is a string but not 'all'"]),
    ("select-no-match-slice", layer("'5:9'"), ["layers[0].select", "selects no layer (there are 2)"]),
    ("select-empty-list", layer("[]"), ["layers[0].select", "selects no layer"]),
    ("select-empty-step", layer("'1:1'"), ["layers[0].select", "selects no layer"]),
    ("select-mapping", layer("{a: 1}"), ["layers[0].select", "got {'a': 1}"]),
    ("select-negative", layer("[-1]"), ["layers[0].select", "layer indices [-1] outside 0..1"]),
    ("select-zero-step", layer("'::0'"), ["layers[0].select", "slice step cannot be zero"]),
    ("select-four-parts", layer("'1:2:3:4'"), ["layers[0].select", "bad layer slice"]),
    # 5. token ids outside the vocabulary
    ("eos-outside-vocab", with_lines("eos_token_id: 64"), ["12:1", "eos_token_id", "token id 64 is outside the vocabulary 0..63"]),
    ("eos-list-outside-vocab", with_lines("eos_token_id: [1, 1000]"), ["eos_token_id", "token id 1000 is outside"]),
    ("eos-negative-in-list", with_lines("eos_token_id: [-1]"), ["eos_token_id", "token id -1 is outside"]),
    ("bos-outside-vocab", with_lines("bos_token_id: 99"), ["bos_token_id", "token id 99 is outside"]),
    ("pad-outside-vocab", with_lines("pad_token_id: 64"), ["pad_token_id", "token id 64 is outside"]),
    ("decoder-start-outside-vocab", with_lines("decoder_start_token_id: 500"), ["decoder_start_token_id", "500 is outside"]),
    ("forced-eos-outside-vocab", with_lines("forced_eos_token_id: 70"), ["forced_eos_token_id", "70 is outside"]),
    ("eos-bool", with_lines("eos_token_id: true"), ["eos_token_id", "got bool True"]),
    # 4. text that reaches terminals
    ("name-escape-sequence", BASE.replace("name: tiny", 'name: "tiny\\e[2J"'), ["1:1", "name", "must not contain control characters", "\\x1b[2J"]),
    ("name-osc-title", BASE.replace("name: tiny", 'name: "\\e]0;pwned\\a"'), ["name", "control characters"]),
    ("name-bidi-override", BASE.replace("name: tiny", 'name: "tiny\\u202egpt"'), ["name", "control characters", "\\u202e"]),
    ("name-c1-csi", BASE.replace("name: tiny", 'name: "x\\x9b31m"'), ["name", "control characters"]),
    ("name-carriage-return", BASE.replace("name: tiny", 'name: "ok\\rEVIL"'), ["name", "control characters"]),
    # 6. control characters in the file itself (no traceback; located)
    ("raw-bel", with_lines("dropout: 0.1\x07"), ["12:13", "control character U+0007"]),
    ("raw-escape", BASE.replace("tiny", "ti\x1bny", 1), ["1:9", "control character U+001B"]),
    ("raw-nul", BASE.replace("gelu", "ge\x00lu"), ["10:32", "control character U+0000"]),
    ("raw-del", with_lines("# \x7f"), ["12:3", "control character U+007F"]),
    ("raw-backspace", with_lines("n_heads: 2\x08"), ["control character U+0008"]),
    # 3. sizes without an upper bound (rotary has no table the estimate would count)
    ("max-len-unbounded", BASE.replace("position: learned", "position: rotary").replace("max_len: 32", "max_len: 1000000000"), ["max_len", "must be <= 16777216, got 1000000000"]),
    ("max-len-just-over", BASE.replace("position: learned", "position: none").replace("max_len: 32", f"max_len: {2**24 + 1}"), ["max_len", "must be <= 16777216"]),
]
# fmt: on


@pytest.mark.parametrize("text, words", [c[1:] for c in SPEC_CASES], ids=[c[0] for c in SPEC_CASES])
def test_hostile_spec_is_a_located_spec_error(text, words, tmp_path):
    path = tmp_path / "case.yaml"
    path.write_text(text)
    with pytest.raises(archzoo.SpecError) as err:
        archzoo.load_spec(path)
    message = str(err.value)
    assert str(path) in message
    for word in words:
        assert word in message, (word, message)
    assert "\x1b" not in message and "\x07" not in message  # printed as escapes


@pytest.mark.parametrize(
    "case",
    ["select-quoted-number", "select-true", "eos-outside-vocab", "name-osc-title", "raw-escape"],
)
def test_hostile_spec_through_the_cli(case, tmp_path):
    text, words = next(c[1:] for c in SPEC_CASES if c[0] == case)
    path = tmp_path / "case.yaml"
    path.write_text(text)
    out = zoo_fails(["validate", path], *words)
    assert "\x1b" not in out and "\x07" not in out


def test_valid_selections_still_select(tmp_path):
    spec = archzoo.load_spec(layer("'1:'"))
    layers = spec.layer_components("decoder")
    assert [lay["ffn"]["kind"] for lay in layers] == ["mlp", "glu"]
    spec = archzoo.load_spec(layer("[0]"))
    assert [lay["ffn"]["kind"] for lay in spec.layer_components("decoder")] == ["glu", "mlp"]


# ---------------------------------------------------------------- overrides


# id, overrides, words of the error
# fmt: off
OVERRIDE_CASES = [
    ("extends-override", {"extends": "bert-base"}, ["<override extends>", "extends: cannot be overridden"]),
    ("extends-override-null", {"extends": None}, ["extends: cannot be overridden"]),
    ("int-key", {1: 2}, ["1: override keys must be strings"]),
    ("tuple-key", {("n_layers",): 2}, ["('n_layers',): override keys must be strings"]),
    ("none-key", {None: 2}, ["None: override keys must be strings"]),
    ("empty-part", {"attention..n_kv_heads": 2}, ["empty key in override"]),
    ("eos-outside-vocab", {"eos_token_id": 10**6}, ["eos_token_id", "outside the vocabulary"]),
    ("select-quoted", {"layers": [{"select": "1", "ffn": "glu"}]}, ["layers[0].select", "'1' is a string"]),
    ("select-bool", {"layers": [{"select": True, "ffn": "glu"}]}, ["layers[0].select", "true/false"]),
    ("name-escape", {"name": "x\x1b[31m"}, ["name: must not contain control characters"]),
    ("max-len-huge", {"max_len": 2**40, "position": "rotary"}, ["max_len: must be <= 16777216"]),
]
# fmt: on


@pytest.mark.parametrize(
    "overrides, words", [c[1:] for c in OVERRIDE_CASES], ids=[c[0] for c in OVERRIDE_CASES]
)
def test_hostile_override_is_a_spec_error(overrides, words):
    with pytest.raises(archzoo.SpecError) as err:
        archzoo.load_spec(BASE, overrides)
    for word in words:
        assert word in str(err.value), (word, str(err.value))


@pytest.mark.parametrize(
    "sets, words",
    [
        (["extends=bert-base"], ["extends: cannot be overridden"]),
        (["eos_token_id=64"], ["eos_token_id", "token id 64 is outside the vocabulary 0..63"]),
        (["name=a\x1b[2Jb"], ["must not contain control characters", "\\x1b[2J"]),
        (["layers=[{select: '1', ffn: glu}]"], ["layers[0].select", "'1' is a string"]),
    ],
    ids=["extends", "eos", "name-escape", "select-quoted"],
)
def test_hostile_set_through_the_cli(sets, words, tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(BASE)
    out = zoo_fails(["build", path, *[a for s in sets for a in ("--set", s)]], *words)
    assert "\x1b" not in out


def test_parameter_of_a_default_component_can_be_overridden():
    """`--set norm.eps=...` on a spec that never names `norm` sets the default norm's eps."""
    assert "norm" not in BASE
    spec = archzoo.load_spec(BASE, {"norm.eps": 1e-6})
    assert spec.data["norm"] == {
        "kind": "layernorm",
        "eps": 1e-6,
        "bias": True,
        "scale": True,  # added with OLMo's norm without a weight
        "offset": 0.0,  # added with Nemotron's LayerNorm1P
    }
    model = archzoo.build_model(spec, device="meta")
    assert model.decoder.final_norm.cfg.eps == 1e-6


# ---------------------------------------------------------------- runaway cost


def chain(tmp_path: Path, n: int) -> Path:
    (tmp_path / "s0.yaml").write_text(BASE)
    for i in range(1, n):
        (tmp_path / f"s{i}.yaml").write_text(f"extends: s{i - 1}.yaml\n")
    return tmp_path / f"s{n - 1}.yaml"


@pytest.mark.parametrize("n", [65, 300, 2000])
def test_long_extends_chain_is_named_as_such(n, tmp_path):
    with pytest.raises(archzoo.SpecError) as err:
        archzoo.load_spec(chain(tmp_path, n))
    assert "extends chain is longer than 64 specs" in str(err.value)
    assert "nests too deeply" not in str(err.value)


def test_extends_chain_of_64_loads(tmp_path):
    assert archzoo.load_spec(chain(tmp_path, 64)).name == "tiny"


@pytest.mark.parametrize(
    "text, where",
    [
        ("name: x\nlayers: [" + "0," * 450_000 + "0]\n", "2:"),
        ("name: x\nl:\n" + "- 0\n" * 240_000, "9998:3"),
        ("name: x\nm: {" + ", ".join(f"k{i}: 0" for i in range(80_000)) + "}\n", "2:"),
    ],
    ids=["flow-list", "block-list", "flow-mapping"],
)
def test_huge_yaml_is_refused_while_parsing(text, where):
    """Under 1 MB, but hundreds of thousands of nodes: refused long before they are built."""
    assert len(text) < 1_000_000
    start = time.monotonic()
    with pytest.raises(archzoo.SpecError, match="YAML has more than 10000 nodes") as err:
        archzoo.load_spec(text)
    assert time.monotonic() - start < 10
    assert f"<text>:{where}" in str(err.value)


def test_spec_file_size_is_checked_before_reading(tmp_path):
    """A 4 GB sparse file: refused from its size, in a process that could not hold it."""
    big = tmp_path / "big.yaml"
    with open(big, "wb") as f:
        f.truncate(4 * 2**30)
    run = zoo_subprocess(["validate", big])
    assert_clean_failure(run, str(big), "spec file is larger than 1000000 bytes (4294967296)")


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "directory"])
def test_spec_that_is_not_a_regular_file_does_not_block(kind, tmp_path):
    if kind == "fifo":
        path = tmp_path / "spec.yaml"
        os.mkfifo(path)
    elif kind == "dev-zero":
        path = Path("/dev/zero")
    else:
        path = tmp_path / "dir.yaml"
        path.mkdir()
        with pytest.raises(archzoo.SpecError, match="no spec file or zoo model named"):
            archzoo.load_spec(path)
        return
    run = zoo_subprocess(["validate", path])
    assert_clean_failure(run, str(path), "spec file is not a regular file")
