"""Plugins you can trust: deterministic order, collisions named with the one kept, failures
isolated (sys.exit included), and saved files that say which package provided each part."""

from __future__ import annotations

import importlib.metadata
import json
from dataclasses import dataclass
from itertools import permutations
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from hostile_util import TINY
from safetensors import safe_open
from torch import Tensor, nn

import archzoo
import archzoo.specs.spec
from archzoo import Registry, hookimpl, param
from archzoo.cli.main import main
from archzoo.parts.converter import Converter
from archzoo.parts.interfaces import Norm


def norm_named(name: str, *, check_raises: bool = False) -> type[Norm]:
    class PluginNorm(Norm):
        summary = "x / max|x| times a gain (a test plugin)"

        @dataclass
        class Config:
            eps: float = param(1e-5, "floor of the scale", gt=0.0)

        def __init__(self, cfg, dims, dim=None):
            super().__init__(cfg, dims)
            self.gain = nn.Parameter(torch.ones(dim or dims.d_model))

        def forward(self, x: Tensor) -> Tensor:
            return self.gain * x / x.abs().amax(-1, keepdim=True).clamp_min(self.cfg.eps)

        @classmethod
        def check(cls, cfg, dims):
            if check_raises:
                raise ZeroDivisionError("plugin bug")
            return []

    PluginNorm.name = name
    PluginNorm.__qualname__ = f"PluginNorm_{name}"
    return PluginNorm


def plugin(*classes: type, zoo_dir: Path | None = None, hook_error: BaseException | None = None):
    class Plugin:
        @hookimpl
        def archzoo_register(self, registrar):
            if hook_error is not None:
                raise hook_error
            for cls in classes:
                registrar.add_component(cls)
            if zoo_dir is not None:
                registrar.add_zoo_dir(zoo_dir)

    return Plugin()


class FakeEntryPoint:
    """What importlib.metadata yields, loading an in-memory plugin (or raising)."""

    def __init__(self, name: str, obj: object = None, error: BaseException | None = None):
        self.name, self.value, self.dist = name, f"fake_{name}:plugin", None
        self.obj, self.error = obj, error

    def load(self) -> object:
        if self.error is not None:
            raise self.error
        return self.obj


def registry_with(monkeypatch, *eps: FakeEntryPoint) -> Registry:
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: list(eps))
    return Registry()


@pytest.mark.parametrize("order", list(permutations("abc")), ids="".join)
def test_plugin_load_order_is_sorted_and_the_first_claim_is_kept(order, monkeypatch):
    eps = {n: FakeEntryPoint(n, plugin(norm_named("dupnorm"))) for n in "abc"}
    reg = registry_with(monkeypatch, *[eps[n] for n in order])
    assert reg.plugin_of("norm", "dupnorm") == "a"
    assert [reg.plugins[n].status for n in "abc"] == ["ok", "failed", "failed"]
    for n in "bc":
        assert reg.plugins[n].error == (
            f"RegistryError: duplicate component norm:dupnorm: registered by plugin 'a' "
            f"and again by plugin '{n}'; kept 'a''s"
        )


@pytest.mark.parametrize(
    "error", [SystemExit(3), SystemExit("bye"), ImportError("no module x"), KeyError("k")]
)
def test_plugin_failing_at_import_is_reported_and_the_rest_load(error, monkeypatch):
    good = FakeEntryPoint("good", plugin(norm_named("goodnorm")))
    reg = registry_with(monkeypatch, FakeEntryPoint("bad", error=error), good)
    assert reg.plugins["bad"].status == "failed"
    assert reg.plugins["bad"].error.startswith(
        f"import of 'fake_bad:plugin' failed: {type(error).__name__}"
    )
    assert reg.has("norm", "goodnorm")


@pytest.mark.parametrize("error", [SystemExit(1), RuntimeError("hook bug"), RecursionError()])
def test_plugin_failing_in_its_hook_adds_nothing(error, monkeypatch):
    ep = FakeEntryPoint("bad", plugin(norm_named("badnorm"), hook_error=error))
    reg = registry_with(monkeypatch, ep)
    assert reg.plugins["bad"].status == "failed"
    assert reg.plugins["bad"].error.startswith(type(error).__name__)
    assert not reg.has("norm", "badnorm")


def zoo_dir_with(tmp_path: Path, *names: str) -> Path:
    d = tmp_path / "zoo"
    d.mkdir(parents=True, exist_ok=True)
    for name in names:
        (d / f"{name}.yaml").write_text("extends: gpt2\nn_layers: 1\n")
    return d


def test_zoo_model_claimed_by_a_plugin_and_the_builtins(tmp_path, monkeypatch):
    ep = FakeEntryPoint("shadow", plugin(zoo_dir=zoo_dir_with(tmp_path, "gpt2", "mine")))
    reg = registry_with(monkeypatch, ep)
    info = reg.plugins["shadow"]
    assert info.status == "failed"
    assert "zoo model 'gpt2' of plugin 'shadow'" in info.error
    assert (
        "is also provided by plugin 'builtins'" in info.error and "kept 'builtins''s" in info.error
    )
    assert "mine" not in archzoo.specs.spec.list_models(reg)  # the failed plugin added nothing


def test_zoo_model_claimed_by_two_plugins(tmp_path, monkeypatch):
    one = FakeEntryPoint("one", plugin(zoo_dir=zoo_dir_with(tmp_path / "1", "same")))
    two = FakeEntryPoint("two", plugin(zoo_dir=zoo_dir_with(tmp_path / "2", "same")))
    reg = registry_with(monkeypatch, two, one)
    assert reg.plugins["one"].status == "ok"
    assert "is also provided by plugin 'one'" in reg.plugins["two"].error
    assert "kept 'one''s" in reg.plugins["two"].error
    assert archzoo.specs.spec.find_model("same", reg).parent == tmp_path / "1" / "zoo"


def test_zoo_file_name_with_control_characters_is_refused(tmp_path, monkeypatch):
    ep = FakeEntryPoint("evil", plugin(zoo_dir=zoo_dir_with(tmp_path, "x\x1b[2J")))
    reg = registry_with(monkeypatch, ep)
    assert reg.plugins["evil"].status == "failed"
    assert "zoo spec file name 'x\\x1b[2J.yaml' has control characters" in reg.plugins["evil"].error


@pytest.fixture()
def global_plugin():
    """Register plugins into the process-wide registry (as `zoo` sees them); remove after."""
    reg = archzoo.get_registry()
    names = []

    def add(name: str, obj: object, **info: str) -> None:
        names.append(name)
        reg.register_plugin(obj, name, **info)

    yield add
    for name in names:
        reg.unregister_plugin(name)


def test_zoo_plugins_shows_the_collision(tmp_path, global_plugin):
    global_plugin("shadow", plugin(zoo_dir=zoo_dir_with(tmp_path, "bert-base")))
    out = CliRunner().invoke(main, ["plugins"]).output
    assert "shadow  [failed]" in out
    assert "zoo model 'bert-base' of plugin 'shadow'" in out and "kept 'builtins''s" in out


def test_unknown_zoo_name_mentions_failed_plugins(tmp_path, global_plugin):
    global_plugin("broken", plugin(hook_error=RuntimeError("boom")))
    with pytest.raises(archzoo.SpecError) as err:
        archzoo.load_spec("my-plugin-model")
    assert "note: plugin(s) not loaded: broken (RuntimeError: boom)" in str(err.value)


def test_component_check_that_raises_is_a_spec_error(global_plugin):
    global_plugin("buggy", plugin(norm_named("buggynorm", check_raises=True)))
    with pytest.raises(archzoo.SpecError) as err:
        archzoo.load_spec("gpt2", {**TINY, "norm": "buggynorm"})
    assert (
        "norm 'buggynorm' (plugin 'buggy') check() failed: ZeroDivisionError('plugin bug')"
        in str(err.value)
    )


def save_with_plugin(tmp_path: Path, global_plugin, dist: str, version: str) -> Path:
    global_plugin("extra", plugin(norm_named("extranorm")), distribution=dist, version=version)
    path = tmp_path / "m.safetensors"
    archzoo.save(archzoo.build_model("gpt2", {**TINY, "norm": "extranorm"}), path)
    return path


def test_saved_file_records_each_components_plugin(tmp_path, global_plugin):
    path = save_with_plugin(tmp_path, global_plugin, "archzoo-extra", "1.2.3")
    with safe_open(str(path), framework="pt") as f:
        recorded = json.loads(f.metadata()["archzoo.components"])
    assert recorded["norm:extranorm"] == {
        "plugin": "extra",
        "distribution": "archzoo-extra",
        "version": "1.2.3",
    }
    assert recorded["attention:mha"]["plugin"] == "builtins"
    assert recorded["attention:mha"]["distribution"] == "archzoo"


def test_loading_without_the_plugin_names_the_package(tmp_path, global_plugin):
    path = save_with_plugin(tmp_path, global_plugin, "archzoo-extra", "1.2.3")
    archzoo.get_registry().unregister_plugin("extra")
    with pytest.raises(archzoo.WeightsError) as err:
        archzoo.load(path)
    assert "unknown norm component 'extranorm'" in str(err.value)
    assert "'norm:extranorm' was provided by plugin 'extra' of 'archzoo-extra' 1.2.3" in str(
        err.value
    )
    assert "pip install 'archzoo-extra==1.2.3'" in str(err.value)


@pytest.mark.parametrize("dist", ["x; rm -rf ~", "$(touch pwned)", "a b"])
def test_a_recorded_package_name_is_never_offered_as_a_command(dist, tmp_path, global_plugin):
    path = save_with_plugin(tmp_path, global_plugin, dist, "1.0")
    archzoo.get_registry().unregister_plugin("extra")
    with pytest.raises(archzoo.WeightsError) as err:
        archzoo.load(path)
    assert "'norm:extranorm' was provided by plugin 'extra'" in str(err.value)
    assert "pip install" not in str(err.value)


class RaisingConverter(Converter):
    """A plugin converter with a bug in `to_spec` or `convert`."""

    def __init__(self, model_type: str, where: str) -> None:
        self.model_type, self.where = model_type, where

    def to_spec(self, config, tensor_names=()):
        if self.where == "to_spec":
            raise KeyError("n_embd")
        return archzoo.load_spec("gpt2", TINY).to_dict()

    def convert(self, src, config):
        raise IndexError("list index out of range")


@pytest.mark.parametrize(
    "where, error", [("to_spec", "KeyError: 'n_embd'"), ("convert", "IndexError: list index")]
)
def test_a_converter_that_raises_is_a_conversion_error_naming_its_plugin(
    where, error, tmp_path, global_plugin
):
    from hostile_util import GPT2_CONFIG, hf_gpt2

    class ConverterPlugin:
        @hookimpl
        def archzoo_register(self, registrar):
            registrar.add_converter(RaisingConverter(f"buggy_{where}", where))

    global_plugin("conv-plugin", ConverterPlugin())
    d = hf_gpt2(tmp_path / "hf", config={**GPT2_CONFIG, "model_type": f"buggy_{where}"})
    with pytest.raises(archzoo.ConversionError) as err:
        archzoo.from_hf(d)
    assert f"the 'buggy_{where}' converter (plugin 'conv-plugin') failed on this checkpoint" in str(
        err.value
    )
    assert error in str(err.value) and "config.json" in str(err.value)
