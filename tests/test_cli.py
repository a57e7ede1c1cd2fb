"""The `zoo` command: list, show, build, validate, and friendly errors with exit code 2."""

from __future__ import annotations

import json
import textwrap

import pytest
import torch
from click.testing import CliRunner

import archzoo
from archzoo import hookimpl
from archzoo.cli.main import main
from archzoo.parts.component import KINDS

TINY = ["n_layers=1", "d_model=32", "n_heads=2", "d_ff=64", "vocab_size=100"]


def zoo(*args: str, ok: bool = True):
    """Run `zoo ARGS...` in-process; check the exit code is 0 (ok) or 2 (user error)."""
    result = CliRunner().invoke(main, list(args))
    expected = 0 if ok else 2
    assert result.exit_code == expected, (result.output, result.exception)
    return result


def tiny_sets() -> list[str]:
    return [a for kv in TINY for a in ("--set", kv)]


def write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


# ---------------------------------------------------------------- list


def test_list_components_table_names_kind_name_plugin_and_summary():
    out = zoo("list").stdout
    assert out.splitlines()[0].split() == ["KIND", "NAME", "PLUGIN", "SUMMARY"]
    mha = next(line for line in out.splitlines() if " mha " in line)
    assert mha.split()[:3] == ["attention", "mha", "builtins"]
    assert archzoo.get_registry().get("attention", "mha").summary in mha


def test_list_components_json_covers_every_registered_component():
    rows = json.loads(zoo("list", "components", "--json").stdout)
    got = {(r["kind"], r["name"]) for r in rows}
    assert got == {(c.kind, c.name) for c in archzoo.list_components()}
    assert ("position", "rotary") in got and ("ffn", "glu") in got
    assert all(r["plugin"] == "builtins" for r in rows if r["name"] == "layernorm")


def test_list_kind_filters_components():
    rows = json.loads(zoo("list", "--kind", "norm", "--json").stdout)
    assert {r["kind"] for r in rows} == {"norm"}
    assert {r["name"] for r in rows} >= {"layernorm", "rmsnorm"}
    text = zoo("list", "--kind", "position").stdout
    assert "rotary" in text and "layernorm" not in text


def test_list_unknown_kind_is_a_usage_error_naming_the_kinds():
    result = zoo("list", "--kind", "normz", ok=False)
    assert "normz" in result.stderr
    for kind in KINDS:
        assert kind in result.stderr


def test_list_models_json_has_meta_param_counts():
    rows = {r["name"]: r for r in json.loads(zoo("list", "models", "--json").stdout)}
    assert set(rows) == set(archzoo.list_models())
    gpt2 = rows["gpt2"]
    assert gpt2["family"] == "decoder"
    assert gpt2["params"] == archzoo.build_model("gpt2", device="meta").num_parameters()
    assert rows["bert-base"]["family"] == "encoder"


def test_list_models_text_shows_thousands_and_human_form():
    out = zoo("list", "models").stdout
    line = next(line for line in out.splitlines() if line.startswith("gpt2 "))
    assert line.split() == ["gpt2", "decoder", "124,439,808", "124.4M"]


def test_list_plugins_and_alias_report_builtins():
    rows = json.loads(zoo("list", "plugins", "--json").stdout)
    assert rows == json.loads(zoo("plugins", "--json").stdout)
    builtins = next(r for r in rows if r["name"] == "builtins")
    assert builtins["status"] == "ok" and builtins["distribution"] == "archzoo"
    assert "attention:mha" in builtins["components"]
    assert "builtins  [ok]" in zoo("plugins").stdout


class BrokenPlugin:
    @hookimpl
    def archzoo_register(self, registrar):
        raise RuntimeError("boom: missing dependency")


def test_plugins_shows_a_failed_plugin_and_why():
    reg = archzoo.get_registry()
    reg.register_plugin(BrokenPlugin(), "broken-plugin", distribution="broken-dist")
    try:
        out = zoo("plugins").stdout
        rows = {r["name"]: r for r in json.loads(zoo("plugins", "--json").stdout)}
    finally:
        reg.unregister_plugin("broken-plugin")
    assert "broken-plugin  [failed]  from broken-dist" in out
    assert "error: RuntimeError: boom: missing dependency" in out
    assert rows["broken-plugin"]["status"] == "failed"
    assert rows["builtins"]["status"] == "ok"


# ---------------------------------------------------------------- show


@pytest.mark.parametrize("name", ["gpt2", "bert-base"])
def test_show_model_prints_resolved_yaml_that_reloads_equal(name):
    out = zoo("show", name).stdout
    assert out.startswith(f"name: {name}\n")
    assert archzoo.load_spec(out) == archzoo.load_spec(name)


def test_show_model_json_is_the_resolved_spec():
    data = json.loads(zoo("show", "gpt2", "--json").stdout)
    assert data == archzoo.load_spec("gpt2").data


def test_show_component_lists_params_with_type_default_and_doc():
    out = zoo("show", "attention:mha").stdout
    assert out.startswith("attention:mha  (plugin builtins)")
    row = next(line for line in out.splitlines() if line.strip().startswith("n_kv_heads"))
    assert row.split()[:5] == ["n_kv_heads", "int", "|", "null", "null"]
    assert "key/value heads" in row
    assert "capabilities: causal, bidirectional, cross" in out


def test_show_bare_unique_component_name_and_json():
    assert "eps" in zoo("show", "rmsnorm").stdout
    data = json.loads(zoo("show", "norm:rmsnorm", "--json").stdout)
    assert data["kind"] == "norm" and data["plugin"] == "builtins"
    assert data["params"]["eps"]["default"] == 1e-6
    assert data["params"]["eps"]["type"] == "float"


def test_show_ambiguous_name_lists_the_options():
    result = zoo("show", "none", ok=False)
    assert "ambiguous" in result.stderr
    for option in ("position:none", "sharing:none", "head:none"):
        assert option in result.stderr


def test_show_unknown_name_suggests_close_ones():
    result = zoo("show", "gtp2", ok=False)
    assert result.stderr.startswith("Error: ")
    assert "'gpt2'" in result.stderr
    result = zoo("show", "head:lmm", ok=False)
    assert "did you mean 'lm'" in result.stderr


# ---------------------------------------------------------------- build


def test_build_summary_shows_total_parts_dims_and_components():
    total = archzoo.build_model("gpt2", device="meta").num_parameters()
    out = zoo("build", "gpt2").stdout
    assert out.startswith("gpt2 (decoder)\n")
    assert f"parameters: {total:,} (124.4M)" in out
    assert "decoder: d_model 768, n_layers 12, n_heads 12, head_dim 64" in out
    assert "attention=mha" in out and "norm=layernorm" in out and "head=lm" in out


def test_build_json_matches_the_python_api():
    data = json.loads(zoo("build", "gpt2", "--json").stdout)
    model = archzoo.build_model("gpt2", device="meta")
    assert data["name"] == "gpt2" and data["family"] == "decoder"
    assert data["params"] == model.num_parameters()
    assert data["parts"] == model.summary()["parts"]
    assert sum(data["parts"].values()) == data["params"]
    assert data["spec"] == archzoo.load_spec("gpt2").data


def test_build_set_overrides_change_the_count():
    full = json.loads(zoo("build", "gpt2", "--json").stdout)["params"]
    small = json.loads(zoo("build", "gpt2", "--set", "n_layers=2", "--json").stdout)
    assert small["params"] == archzoo.build_model("gpt2", {"n_layers": 2}, "meta").num_parameters()
    assert small["params"] < full
    assert small["spec"]["n_layers"] == 2 and small["dims"]["decoder"]["n_layers"] == 2


def test_build_encoder_decoder_reports_both_stacks():
    data = json.loads(zoo("build", "t5-small", "--json").stdout)
    assert set(data["dims"]) == {"encoder", "decoder"}
    assert data["params"] == archzoo.build_model("t5-small", device="meta").num_parameters()


def test_build_out_writes_weights_that_load_with_identical_logits(tmp_path, monkeypatch):
    saved = []
    real_save = archzoo.save
    monkeypatch.setattr(archzoo, "save", lambda m, p: (saved.append(m), real_save(m, p)))
    path = tmp_path / "tiny.safetensors"
    out = zoo("build", "gpt2", *tiny_sets(), "--out", str(path)).stdout
    assert f"wrote {path}" in out
    (model,) = saved
    loaded = archzoo.load(path)
    assert loaded.spec == model.spec and loaded.spec.data["d_model"] == 32
    ids = torch.randint(0, 100, (2, 7))
    model.eval(), loaded.eval()
    with torch.no_grad():
        assert torch.equal(model(ids).logits, loaded(ids).logits)


def test_build_out_into_missing_directory_is_a_user_error(tmp_path):
    result = zoo("build", "gpt2", "--out", str(tmp_path / "no" / "m.safetensors"), ok=False)
    assert "does not exist" in result.stderr and "Traceback" not in result.output


def test_build_bad_override_reports_located_error():
    result = zoo("build", "gpt2", "--set", "n_layers=0", ok=False)
    assert result.stderr.startswith("Error: ")
    assert "n_layers: must be >= 1, got 0" in result.stderr
    result = zoo("build", "gpt2", "--set", "n_layers", ok=False)
    assert "must look like KEY=VALUE" in result.stderr


# ---------------------------------------------------------------- validate


GOOD = """\
    name: tiny-gpt
    family: decoder
    vocab_size: 100
    d_model: 32
    n_layers: 2
    n_heads: 2
    d_ff: 64
    max_len: 16
    attention: {kind: mha, n_kv_heads: 1}
    norm: rmsnorm
    head: {kind: lm, tie: true}
"""


def test_validate_good_file(tmp_path):
    path = write(tmp_path, "tiny.yaml", GOOD)
    n = archzoo.build_model(path, device="meta").num_parameters()
    assert zoo("validate", str(path)).stdout == f"ok: tiny-gpt (decoder, {n:,} params)\n"
    n2 = archzoo.build_model(path, {"n_layers": 3}, "meta").num_parameters()
    out = zoo("validate", str(path), "--set", "n_layers=3").stdout
    assert out == f"ok: tiny-gpt (decoder, {n2:,} params)\n"


def test_validate_typo_reports_file_line_and_suggestion(tmp_path):
    path = write(tmp_path, "typo.yaml", GOOD.replace("n_layers: 2", "n_layayers: 2"))
    result = zoo("validate", str(path), ok=False)
    assert result.stdout == ""
    assert result.stderr.startswith("Error: ")
    assert f"{path}:5:1: n_layayers: unknown key (did you mean 'n_layers'?)" in result.stderr
    assert "Traceback" not in result.output


def test_validate_prints_every_issue(tmp_path):
    text = GOOD.replace("n_layers: 2", "n_layayers: 2").replace("norm: rmsnorm", "norm: rmsnrom")
    path = write(tmp_path, "two.yaml", text)
    err = zoo("validate", str(path), ok=False).stderr
    assert "problems in spec" in err
    assert f"{path}:5:1: n_layayers" in err
    assert f"{path}:10:1: norm.kind: unknown norm component 'rmsnrom'" in err
    assert "did you mean 'rmsnorm'?" in err


def test_validate_missing_file_is_a_user_error():
    err = zoo("validate", "no-such-spec.yaml", ok=False).stderr
    assert "no spec file or zoo model named 'no-such-spec.yaml'" in err


def test_debug_flag_lets_the_exception_through(tmp_path):
    path = write(tmp_path, "typo.yaml", GOOD.replace("n_layers: 2", "n_layayers: 2"))
    result = CliRunner().invoke(main, ["--debug", "validate", str(path)])
    assert isinstance(result.exception, archzoo.SpecError)
    assert "n_layayers" in str(result.exception)


def test_zoo_is_quiet_without_numpy():
    """A fresh install has no NumPy; torch then warns on import, which `zoo` must not show."""
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['numpy'] = None\n"
        "from archzoo.cli.main import main\n"
        "main(['build', 'gpt2', '--set', 'n_layers=1'])\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "gpt2 (decoder)" in run.stdout
    assert "NumPy" not in run.stderr
