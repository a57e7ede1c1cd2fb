"""The pluggy registry: built-ins via the public hook, throwaway plugins, failures isolated."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import pytest
import torch
from torch import Tensor, nn

import archzoo
import archzoo.parts.component
from archzoo import Registry, RegistryError, hookimpl, param
from archzoo.parts.interfaces import Norm
from archzoo.parts.registry import Registrar, get_registry


class ScaleNorm(Norm):
    """Nguyen & Salazar (2019): g * x / ||x||."""

    name = "scalenorm"
    summary = "scale by a single learned gain over the L2 norm"

    @dataclass
    class Config:
        eps: float = param(1e-5, "added to the norm", gt=0.0)

    def __init__(self, cfg, dims, dim=None):
        super().__init__(cfg, dims)
        self.gain = nn.Parameter(torch.tensor(float((dim or dims.d_model) ** 0.5)))

    def forward(self, x: Tensor) -> Tensor:
        return self.gain * x / x.norm(dim=-1, keepdim=True).clamp_min(self.cfg.eps)


def plugin_adding(*classes):
    class Plugin:
        @hookimpl
        def archzoo_register(self, registrar):
            for cls in classes:
                registrar.add_component(cls)

    return Plugin()


@pytest.fixture()
def registry():
    return Registry(load_entry_points=False)


def test_builtins_are_registered_through_the_hook(registry):
    info = registry.plugins["builtins"]
    assert info.status == "ok"
    assert "attention:mha" in info.components and "position:rotary" in info.components
    assert registry.plugin_of("norm", "layernorm") == "builtins"
    expected = {
        "embedding": {"token"},
        "position": {"sinusoidal", "learned", "rotary", "alibi", "none"},
        "attention": {"mha"},
        "norm": {"layernorm", "rmsnorm"},
        "block": {"post_ln", "pre_ln"},
        "ffn": {"mlp", "glu"},
        "sharing": {"none"},
        "head": {"none", "lm", "mlm", "classifier", "token_classifier"},
    }
    for kind, names in expected.items():
        assert names <= set(registry.names(kind)), kind


def test_throwaway_plugin_component_is_usable_in_a_spec(registry):
    info = registry.register_plugin(plugin_adding(ScaleNorm), "scalenorm-plugin")
    assert info.status == "ok" and info.components == ["norm:scalenorm"]
    model = archzoo.build_model(
        "gpt2",
        {
            "n_layers": 1,
            "d_model": 16,
            "n_heads": 2,
            "d_ff": 32,
            "vocab_size": 50,
            "norm": "scalenorm",
        },
        registry=registry,
    )
    norm = model.decoder.blocks[0].attention_norm
    assert isinstance(norm, ScaleNorm)
    x = torch.randn(2, 3, 16)
    expected = 4.0 * x / x.norm(dim=-1, keepdim=True)
    torch.testing.assert_close(norm(x), expected)
    registry.unregister_plugin("scalenorm-plugin")
    assert not registry.has("norm", "scalenorm")


def test_duplicate_names_fail_naming_both_plugins(registry):
    class Dup(ScaleNorm):
        name = "layernorm"

    info = registry.register_plugin(plugin_adding(Dup), "copycat")
    assert info.status == "failed"
    assert "norm:layernorm" in info.error
    assert "'builtins'" in info.error and "'copycat'" in info.error
    # the built-in is untouched and the rest keeps working
    assert registry.get("norm", "layernorm").__module__.startswith("archzoo.plugins")


def test_a_raising_hook_is_reported_and_adds_nothing(registry):
    class Broken:
        @hookimpl
        def archzoo_register(self, registrar):
            registrar.add_component(ScaleNorm)
            raise RuntimeError("boom")

    info = registry.register_plugin(Broken(), "broken")
    assert info.status == "failed" and "RuntimeError: boom" in info.error
    assert not registry.has("norm", "scalenorm")  # staged work was rolled back
    assert registry.get("attention", "mha") is not None
    with pytest.raises(RegistryError, match="plugin\\(s\\) not loaded: broken"):
        registry.get("norm", "scalenorm")


@pytest.mark.parametrize(
    "bad, fragment",
    [
        (SimpleNamespace(kind="norm", name="x"), "not a subclass of archzoo.Component"),
        (type("NoKind", (archzoo.Component,), {"kind": "widget", "name": "w"}), "kind 'widget'"),
        (type("BadName", (Norm,), {"name": "has space"}), "expected an identifier"),
    ],
)
def test_classes_that_violate_the_interface_are_refused(registry, bad, fragment):
    info = registry.register_plugin(plugin_adding(bad), "bad")
    assert info.status == "failed" and fragment in info.error


def test_unknown_component_lookup_suggests(registry):
    with pytest.raises(RegistryError, match="did you mean 'rotary'"):
        registry.get("position", "rotery")
    with pytest.raises(RegistryError, match="unknown component kind 'postion'"):
        registry.get("postion", "rotary")


def test_public_listing_functions():
    kinds = {c.kind for c in archzoo.list_components()}
    assert kinds == set(archzoo.parts.component.KINDS)
    assert all(c.kind == "position" for c in archzoo.list_components("position"))
    assert {"gpt2", "bert-base"} <= set(archzoo.list_models())
    described = archzoo.get_registry().get("attention", "mha").describe()
    assert described["params"]["n_kv_heads"]["default"] is None
    assert "MQA" in described["params"]["n_kv_heads"]["doc"]


def test_add_package_registers_what_is_declared_where_it_is_defined(tmp_path, monkeypatch):
    pkg = tmp_path / "declpkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "norms.py").write_text(
        "from archzoo.parts.interfaces import Norm\n"
        "class BaseNorm(Norm):\n"  # undeclared base: not a component
        "    pass\n"
        "class HalfNorm(BaseNorm, name='halfnorm'):\n"
        "    '''Halve the input.'''\n"
        "    def forward(self, x):\n"
        "        return x / 2\n"
    )
    # imports a declared class from elsewhere: it must not be registered twice
    (pkg / "reexport.py").write_text("from .sub.norms import HalfNorm\n")
    monkeypatch.syspath_prepend(str(tmp_path))

    registrar = Registrar("declpkg")
    registrar.add_package("declpkg")
    assert [c.__name__ for c in registrar.components] == ["HalfNorm"]
    assert registrar.converters == []


def test_builtins_register_every_declared_class_once():
    import archzoo.plugins as builtins_pkg

    registrar = Registrar("builtins")
    registrar.add_package(builtins_pkg.__name__)
    names = [(c.kind, c.name) for c in registrar.components]
    assert len(names) == len(set(names)) and len(names) >= 44
    types = [c.model_type for c in registrar.converters]
    assert len(types) == len(set(types)) and {"llama", "gpt2", "bert", "t5"} <= set(types)
    # the registry built through the hook has exactly these
    registry = get_registry()
    assert sorted(names) == sorted(
        (c.kind, c.name)
        for c in registry.components()
        if c.__module__.startswith("archzoo.plugins")
    )


def test_a_converter_must_be_a_converter_instance():
    class DuckTyped:  # the pre-0.2 duck-typed contract: to_spec(config) and convert(src, config)
        model_type = "duck"

        def to_spec(self, config):
            return {}

        def convert(self, src, config):
            return {}

    with pytest.raises(RegistryError, match="is not an archzoo.parts.converter.Converter instance"):
        Registrar("duck").add_converter(DuckTyped())
