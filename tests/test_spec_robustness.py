"""Specs that cannot hurt the user: one bad spec file per case, through the `zoo` CLI.

Every case must exit with code 2, print `Error: FILE:LINE:COL: key.path: message` (plus a
close-name suggestion where one applies) and no traceback, for `validate` and `build`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

import archzoo
import archzoo.cli.main as cli
from archzoo.cli.main import main

GOOD = """\
name: tiny
family: decoder
vocab_size: 100
d_model: 32
n_layers: 2
n_heads: 4
d_ff: 64
max_len: 16
dropout: 0.1
position: learned
attention: {kind: mha}
norm: {kind: layernorm, eps: 1.0e-5}
ffn: {kind: mlp, activation: gelu}
head: {kind: lm, tie: true}
"""
MARKER = "ARCHZOO_MARKER"  # replaced by a path that code from a spec would create


def edit(*changes: tuple[str, str]) -> str:
    """GOOD with whole lines replaced: edit(("n_heads: 4", "n_heads: 5"), ...)."""
    text = GOOD
    for old, new in changes:
        assert f"{old}\n" in text, old
        text = text.replace(f"{old}\n", f"{new}\n", 1)
    return text


# id, spec text (str, or bytes for raw files), expected message fragment, "LINE:COL" or
# None when the problem has no place in the file, suggestion or None.
# fmt: off
CASES = [
    # --- YAML itself
    ("yaml-syntax", edit(("attention: {kind: mha}", "attention: {kind: mha")), "YAML syntax error", "12:5", None),
    ("yaml-bad-indent", edit(("n_layers: 2", "n_layers: 2\n  extra: [1, 2")), "YAML syntax error", "6:8", None),
    ("top-level-list", "- name: tiny\n- family: decoder\n", "a spec must be a mapping at top level, got list", "1:1", None),
    ("top-level-scalar", "just a sentence\n", "a spec must be a mapping at top level, got str", "1:1", None),
    ("empty-file", "", "spec is empty", "1:1", None),
    ("only-comments", "# nothing here\n\n", "spec is empty", "1:1", None),
    ("not-utf8", GOOD.encode().replace(b"d_model: 32", b"d_model: 3\xff2"), "file is not UTF-8 text (byte 0xff at offset", "4:11", None),
    ("duplicate-key", edit(("n_layers: 2", "n_layers: 2\nn_layers: 3")), "duplicate key 'n_layers'", "6:1", None),
    ("complex-key", edit(("n_layers: 2", "n_layers: 2\n? [a, b]\n: 1")), "mapping keys must be plain scalars", "6:3", None),
    ("deep-nesting", GOOD + "x: " + "[" * 3000 + "]" * 3000 + "\n", "YAML nests too deeply: more than 100 levels", "15:103", None),
    ("too-many-digits", edit(("d_model: 32", "d_model: 1" + "0" * 5000)), "d_model: refused YAML value: Exceeds the limit", "4:10", None),
    ("bad-date", edit(("name: tiny", "name: 2024-02-30")), "name: refused YAML value: day is out of range", "1:7", None),
    # --- YAML tags that would construct objects: refused, never run
    ("tag-apply", edit(("name: tiny", f"name: !!python/object/apply:os.system ['touch {MARKER}']")), "refused YAML tag 'tag:yaml.org,2002:python/object/apply:os.system'", "1:7", None),
    ("tag-new", edit(("name: tiny", f"name: !!python/object/new:pathlib.Path {{args: ['{MARKER}']}}")), "refused YAML tag 'tag:yaml.org,2002:python/object/new:pathlib.Path'", "1:7", None),
    ("tag-exec", edit(("d_ff: 64", f"d_ff: !!python/object/apply:builtins.exec [\"open('{MARKER}', 'w')\"]")), "refused YAML tag 'tag:yaml.org,2002:python/object/apply:builtins.exec'", "7:7", None),
    ("tag-name", edit(("head: {kind: lm, tie: true}", "head: {kind: lm, tie: !!python/name:os.system ''}")), "head.tie: refused YAML value: could not determine a constructor", "14:23", None),
    ("tag-custom", edit(("norm: {kind: layernorm, eps: 1.0e-5}", "norm: !layernorm {eps: 1.0e-5}")), "refused YAML tag '!layernorm'", "12:7", None),
    # --- unknown names, with suggestions
    ("unknown-key", edit(("n_layers: 2", "n_layer: 2")), "n_layer: unknown key", "5:1", "n_layers"),
    ("unknown-component", edit(("position: learned", "position: rotery")), "position.kind: unknown position component 'rotery'", "10:1", "rotary"),
    ("unknown-component-kind", edit(("attention: {kind: mha}", "attention: {kind: mhaa}")), "attention.kind: unknown attention component 'mhaa'", "11:13", "mha"),
    ("unknown-parameter", edit(("ffn: {kind: mlp, activation: gelu}", "ffn: {kind: mlp, activaton: gelu}")), "ffn.activaton: unknown parameter of ffn 'mlp'", "13:18", "activation"),
    ("unknown-choice", edit(("ffn: {kind: mlp, activation: gelu}", "ffn: {kind: mlp, activation: gleu}")), "ffn.activation: must be one of", "13:18", "gelu"),
    ("unknown-layer-key", edit(("d_ff: 64", "d_ff: 64\nlayers: [{select: all, fnn: glu}]")), "layers[0].fnn: not a per-layer key", "8:24", "ffn"),
    ("unknown-family", edit(("family: decoder", "family: decodr")), "family: must be one of ['encoder', 'decoder', 'encoder-decoder']", "2:1", "decoder"),
    # --- wrong types
    ("type-int", edit(("d_model: 32", "d_model: thirty-two")), "d_model: must be an integer, got str 'thirty-two'", "4:1", None),
    ("type-float-for-int", edit(("n_layers: 2", "n_layers: 2.5")), "n_layers: must be an integer, got float 2.5", "5:1", None),
    ("type-bool", edit(("head: {kind: lm, tie: true}", "head: {kind: lm, tie: maybe}")), "head.tie: must be true or false, got 'maybe'", "14:18", None),
    ("type-component", edit(("attention: {kind: mha}", "attention: [mha]")), "attention: must be a attention name or a mapping with 'kind:'", "11:1", None),
    ("type-number", edit(("dropout: 0.1", "dropout: high")), "dropout: must be a number, got str 'high'", "9:1", None),
    ("type-name", edit(("name: tiny", "name: [tiny]")), "name: must be a string", "1:1", None),
    # --- out-of-range values
    ("dropout-one", edit(("dropout: 0.1", "dropout: 1.0")), "dropout: must be < 1.0, got 1.0", "9:1", None),
    ("dropout-negative", edit(("dropout: 0.1", "dropout: -0.1")), "dropout: must be >= 0.0, got -0.1", "9:1", None),
    ("dropout-nan", edit(("dropout: 0.1", "dropout: .nan")), "dropout: must be a finite number, got nan", "9:1", None),
    ("attention-dropout", edit(("dropout: 0.1", "dropout: 0.1\nattention_dropout: 2")), "attention_dropout: must be < 1.0, got 2", "10:1", None),
    ("inner-dropout", edit(("ffn: {kind: mlp, activation: gelu}", "ffn: {kind: mlp, inner_dropout: 1}")), "ffn.inner_dropout: must be < 1.0, got 1", "13:18", None),
    ("d-model-zero", edit(("d_model: 32", "d_model: 0")), "d_model: must be >= 1, got 0", "4:1", None),
    ("n-heads-negative", edit(("n_heads: 4", "n_heads: -4")), "n_heads: must be >= 1, got -4", "6:1", None),
    ("vocab-zero", edit(("vocab_size: 100", "vocab_size: 0")), "vocab_size: must be >= 1, got 0", "3:1", None),
    ("d-ff-zero", edit(("d_ff: 64", "d_ff: 0")), "d_ff: must be >= 1, got 0", "7:1", None),
    ("max-len-zero", edit(("max_len: 16", "max_len: 0")), "max_len: must be >= 1, got 0", "8:1", None),
    ("eps-zero", edit(("norm: {kind: layernorm, eps: 1.0e-5}", "norm: {kind: layernorm, eps: 0}")), "norm.eps: must be > 0.0, got 0", "12:25", None),
    ("eps-negative", edit(("norm: {kind: layernorm, eps: 1.0e-5}", "norm: {kind: rmsnorm, eps: -1.0e-6}")), "norm.eps: must be > 0.0, got -1e-06", "12:23", None),
    ("init-std-inf", edit(("dropout: 0.1", "dropout: 0.1\ninit_std: .inf")), "init_std: must be a finite number, got inf", "10:1", None),
    ("required-missing", edit(("n_heads: 4", "# no heads")), "n_heads: is required", "1:1", None),
    # --- sizes that do not fit together
    ("d-model-not-divisible", edit(("n_heads: 4", "n_heads: 5")), "n_heads: d_model 32 is not divisible by n_heads 5", "6:1", None),
    ("kv-heads-not-divisible", edit(("attention: {kind: mha}", "attention: {kind: mha, n_kv_heads: 3}")), "attention.n_kv_heads: n_heads 4 is not divisible by n_kv_heads 3", "11:24", None),
    ("rotary-odd-head-dim", edit(("d_model: 32", "d_model: 36"), ("position: learned", "position: rotary")), "position.kind: position 'rotary' needs an even head dimension, got head_dim 9", "10:1", None),
    ("layer-out-of-range", edit(("d_ff: 64", "d_ff: 64\nlayers: [{select: [5], ffn: glu}]")), "layers[0].select: layer indices [5] outside 0..1", "8:11", None),
    # --- extends
    ("extends-missing-base", edit(("name: tiny", "name: tiny\nextends: gpt-2")), "extends: no spec file or zoo model named 'gpt-2'", "2:1", "gpt2"),
    ("extends-missing-file", edit(("name: tiny", "name: tiny\nextends: ./base.yml")), "no spec file or zoo model named './base.yml'", "2:1", None),
    ("extends-self", edit(("name: tiny", "name: tiny\nextends: case.yaml")), "extends cycle", "2:1", None),
    ("extends-wrong-type", edit(("name: tiny", "name: tiny\nextends: [gpt2]")), "extends: must be a zoo name or a path", "2:1", None),
    ("extends-broken-base", "extends: base-bad.yaml\nn_layers: 1\n", "base-bad.yaml:5:1: n_layayers: unknown key", None, "n_layers"),
    # --- heads and families that do not go together
    ("lm-head-on-encoder", edit(("family: decoder", "family: encoder")), "head.kind: head 'lm' does not fit a encoder model", "14:8", None),
    ("mlm-head-on-decoder", edit(("head: {kind: lm, tie: true}", "head: mlm")), "head.kind: head 'mlm' does not fit a decoder model", "14:1", None),
    ("stack-section-on-decoder", edit(("n_layers: 2", "n_layers: 2\nencoder: {n_layers: 3}")), "encoder: the 'encoder:' section is only for encoder-decoder models", "6:1", None),
    ("stack-section-bad-key", edit(("family: decoder", "family: encoder-decoder"), ("n_layers: 2", "n_layers: 2\ndecoder: {d_model: 8}")), "decoder.d_model: cannot be set per stack", "6:11", None),
]
# fmt: on


@pytest.fixture()
def no_code_runs(monkeypatch, tmp_path):
    """Fail loudly if anything a spec names gets called; return the marker path."""
    calls = []
    monkeypatch.setattr(os, "system", lambda *a: calls.append(("os.system", a)) or 0)
    monkeypatch.setattr(subprocess, "Popen", lambda *a, **k: calls.append(("Popen", a)))
    yield tmp_path / "pwned", calls
    assert calls == []


def write_case(tmp_path: Path, text: str | bytes, marker: Path) -> Path:
    path = tmp_path / "case.yaml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text.replace(MARKER, str(marker)))
    (tmp_path / "base-bad.yaml").write_text(edit(("n_layers: 2", "n_layayers: 2")))
    (tmp_path / "a.yaml").write_text("extends: b.yaml\n")
    (tmp_path / "b.yaml").write_text("extends: a.yaml\n")
    return path


def zoo(*args: str):
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 2, (result.output, result.exception)
    assert isinstance(result.exception, SystemExit)  # a clean exit, not a crash
    assert result.stdout == "" and "Traceback" not in result.output
    assert result.stderr.startswith("Error: ") and result.stderr.count("\n") >= 1
    return result.stderr


@pytest.mark.parametrize("command", ["validate", "build"])
@pytest.mark.parametrize(
    "text, fragment, where, suggestion", [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_bad_spec_is_a_located_error(
    tmp_path, no_code_runs, command, text, fragment, where, suggestion
):
    marker, _ = no_code_runs
    path = write_case(tmp_path, text, marker)
    err = zoo(command, str(path))
    assert fragment in err
    if where is not None:
        assert f"{path}:{where}: " in err
    else:  # a problem in another file: still names that file
        assert str(tmp_path) in err
    if suggestion is not None:
        assert f"(did you mean '{suggestion}'?)" in err
    else:
        assert "did you mean" not in err
    assert not marker.exists()


def test_every_issue_of_a_file_is_reported_in_file_order(tmp_path):
    text = edit(
        ("n_layers: 2", "n_layer: 2"),
        ("dropout: 0.1", "dropout: 1.5"),
        ("position: learned", "position: rotery"),
        ("norm: {kind: layernorm, eps: 1.0e-5}", "norm: {kind: layernorm, eps: -1}"),
    )
    path = write_case(tmp_path, text, tmp_path / "unused")
    err = zoo("validate", str(path))
    assert err.startswith("Error: 5 problems in spec:\n")
    lines = [line for line in err.splitlines() if line.startswith("  - ")]
    assert [line.split(":")[1] for line in lines] == ["1", "5", "9", "10", "12"]
    assert f"{path}:1:1: n_layers: is required" in lines[0]


def test_extends_cycle_between_two_files(tmp_path):
    write_case(tmp_path, GOOD, tmp_path / "unused")
    err = zoo("validate", str(tmp_path / "a.yaml"))
    assert "extends cycle:" in err and f"{tmp_path / 'a.yaml'}:1:1: extends:" in err


def test_override_errors_are_located_at_the_override(tmp_path):
    path = write_case(tmp_path, GOOD, tmp_path / "unused")
    err = zoo("build", str(path), "--set", "dropout=2", "--set", "n_layer=3")
    assert "<override dropout>:1:1: dropout: must be < 1.0, got 2" in err
    assert "<override n_layer>:1:1: n_layer: unknown key (did you mean 'n_layers'?)" in err


# fmt: off
ABSURD = [
    ("huge-everything", [("d_model: 32", "d_model: 1000000"), ("n_heads: 4", "n_heads: 1"), ("n_layers: 2", "n_layers: 10000")], "absurd size"),
    ("huge-d-ff", [("d_ff: 64", "d_ff: 1000000000000000")], "absurd size"),
    ("huge-max-len", [("max_len: 16", "max_len: 1000000000000000")], "absurd size"),
    ("huge-head-dim", [("d_model: 32", "d_model: 1000000\nhead_dim: 100000000"), ("n_heads: 4", "n_heads: 64")], "absurd size"),
    ("huge-vocab", [("vocab_size: 100", "vocab_size: 1000000000000")], "vocab_size: must be <= 10000000"),
    ("huge-d-model", [("d_model: 32", "d_model: 1000000000000")], "d_model: must be <= 1000000"),
]
# fmt: on


@pytest.mark.parametrize("changes, fragment", [a[1:] for a in ABSURD], ids=[a[0] for a in ABSURD])
@pytest.mark.parametrize("command", ["validate", "build"])
def test_absurd_sizes_are_refused_fast_before_anything_is_built(
    tmp_path, monkeypatch, command, changes, fragment
):
    built = []
    monkeypatch.setattr(cli.archzoo, "build_model", lambda *a, **k: built.append(a))
    path = write_case(tmp_path, edit(*changes), tmp_path / "unused")
    start = time.perf_counter()
    err = zoo(command, str(path))
    assert time.perf_counter() - start < 10.0  # generous: the suite may run on a loaded box
    assert fragment in err and f"{path}:" in err
    assert built == []  # refused while validating: no module, no tensor


ZOO = "import sys; from archzoo.cli.main import main; sys.exit(main())"


def test_traceback_only_with_debug(tmp_path):
    path = write_case(tmp_path, edit(("dropout: 0.1", "dropuot: 0.1")), tmp_path / "unused")
    env = {k: v for k, v in os.environ.items() if k != "ARCHZOO_DISABLE_PLUGINS"}
    plain = subprocess.run(
        [sys.executable, "-c", ZOO, "validate", str(path)], capture_output=True, text=True, env=env
    )
    assert plain.returncode == 2 and "Traceback" not in plain.stderr
    assert plain.stderr == f"Error: {path}:9:1: dropuot: unknown key (did you mean 'dropout'?)\n"
    debug = subprocess.run(
        [sys.executable, "-c", ZOO, "--debug", "validate", str(path)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert debug.returncode == 1
    assert "Traceback (most recent call last)" in debug.stderr
    assert "archzoo.errors.SpecError" in debug.stderr and "dropuot: unknown key" in debug.stderr


def test_python_api_raises_only_spec_error(tmp_path):
    for case_id, text, fragment, *_ in CASES:
        path = write_case(tmp_path, text, tmp_path / "unused")
        with pytest.raises(archzoo.SpecError) as err:
            archzoo.load_spec(path)
        assert fragment in str(err.value), case_id


@pytest.mark.parametrize(
    "overrides, path",
    [
        ({"position": {"kind": "t5_relative", "n_buckets": 10**11}}, "position.n_buckets"),
        ({"position": {"kind": "relative", "max_distance": 10**9}}, "position.max_distance"),
        ({"embedding": {"kind": "token", "type_vocab_size": 10**9}}, "embedding.type_vocab_size"),
    ],
)
def test_component_sizes_are_bounded(overrides, path):
    with pytest.raises(archzoo.SpecError) as err:
        archzoo.load_spec("gpt2", overrides)
    assert any(i.path == path and "must be <=" in i.message for i in err.value.issues)


def test_python_dash_m_runs_the_cli():
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "archzoo.cli", "list", "--kind", "norm"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0 and "rmsnorm" in out.stdout
