"""Declaring a component or converter in its class line, and the attribute style it replaces.

`class X(Norm, name="x", kv_cache=True):` with the summary as the docstring's first line and
a plain `class Config:` must mean exactly what the attribute style (`name = ...`,
`summary = ...`, `capabilities = Capabilities(...)`, `@dataclass class Config`) means, and
classes written in the old style (published plugins, examples/) must keep working.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import pytest
import torch

from archzoo.parts.component import Capabilities, param
from archzoo.parts.converter import Converter, Task
from archzoo.parts.interfaces import Attention, Norm
from archzoo.parts.registry import Registrar, get_registry
from archzoo.plugins.attention.mha import MultiHeadAttention
from archzoo.plugins.converters.gpt2 import GPT2Converter


class UnitGainNorm(Norm):
    """The body both declarations share: gain * x / max(||x||, eps)."""

    def __init__(self, cfg: Any, dims: Any, dim: int | None = None) -> None:
        super().__init__(cfg, dims)
        self.gain = torch.nn.Parameter(torch.ones(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.gain * x / x.norm(dim=-1, keepdim=True).clamp_min(self.cfg.eps)


class OldStyleNorm(UnitGainNorm):
    name = "old_scale"
    summary = "a learned gain over the unit-norm input"
    capabilities = Capabilities(even_head_dim=True)

    @dataclass
    class Config:
        eps: float = param(1e-5, "lower bound of the L2 norm", gt=0.0)
        gains: list[float] = param([1.0], "one per group")


class NewStyleNorm(UnitGainNorm, name="old_scale", even_head_dim=True):
    """a learned gain over the unit-norm input.

    More prose after the first line is not part of the summary.
    """

    class Config:
        eps: float = param(1e-5, "lower bound of the L2 norm", gt=0.0)
        gains: list[float] = param([1.0], "one per group")


def test_class_line_declares_what_the_attributes_declare():
    old, new = OldStyleNorm.describe(), NewStyleNorm.describe()
    assert new == old
    assert new["summary"] == "a learned gain over the unit-norm input"  # final period dropped
    assert new["capabilities"]["even_head_dim"] is True
    assert new["params"]["gains"]["default"] == [1.0]


def test_plain_config_becomes_a_dataclass_with_fresh_mutable_defaults():
    assert dataclasses.is_dataclass(NewStyleNorm.Config)
    a, b = NewStyleNorm.Config(), NewStyleNorm.Config()
    a.gains.append(2.0)
    assert b.gains == [1.0]
    with pytest.raises(TypeError, match="unexpected keyword argument 'epsilon'"):
        NewStyleNorm.Config(epsilon=1.0)


@pytest.mark.parametrize("cls", [OldStyleNorm, NewStyleNorm])
def test_both_styles_register_and_build_with_the_same_numbers(cls):
    registrar = Registrar("test")
    registrar.add_component(cls)
    assert registrar.components == [cls]
    x = torch.tensor([[3.0, 4.0], [0.0, 2.0]])
    torch.testing.assert_close(cls(cls.Config(), None)(x), torch.tensor([[0.6, 0.8], [0.0, 1.0]]))


def test_flags_apply_over_the_inherited_capabilities():
    class NoCacheMHA(MultiHeadAttention, name="no_cache_mha", kv_cache=False):
        """mha without a KV cache"""

    assert MultiHeadAttention.capabilities.kv_cache and MultiHeadAttention.capabilities.cross
    assert NoCacheMHA.capabilities == Capabilities(cross=True, kv_cache=False, mup=True)
    assert NoCacheMHA.Config is MultiHeadAttention.Config  # no Config: the parent's


def test_config_extending_the_parents_keeps_its_fields():
    class Wider(MultiHeadAttention, name="wider"):
        """mha with one more parameter"""

        class Config(MultiHeadAttention.Config):
            extra: int = param(3, "one more", min=0)

    names = [f.name for f in dataclasses.fields(Wider.Config)]
    assert names[-1] == "extra"
    assert names[:-1] == [f.name for f in dataclasses.fields(MultiHeadAttention.Config)]
    assert Wider.Config().extra == 3


def test_an_explicit_summary_wins_over_the_docstring():
    class Documented(Norm, name="documented"):
        """What the class is, for readers of the code."""

        summary = "what `zoo list` shows"

    assert Documented.summary == "what `zoo list` shows"


def test_an_unknown_flag_in_the_class_line_names_the_class_and_flag():
    with pytest.raises(TypeError, match=r"Typo: unknown capability 'kv_cahce' in the class line"):

        class Typo(Attention, name="typo", kv_cahce=True):
            """misspelt flag"""


def test_a_builtin_declared_in_the_class_line_reads_as_before():
    mha = get_registry().get("attention", "mha")
    assert mha.name == "mha" and mha.kind == "attention"
    assert mha.summary.startswith("dense multi-head attention")
    assert mha.capabilities == Capabilities(cross=True, kv_cache=True, mup=True)


def test_converter_class_line_sets_the_type_attributes():
    assert (GPT2Converter.model_type, GPT2Converter.hf_prefix, GPT2Converter.family) == (
        "gpt2",
        "GPT2",
        "decoder",
    )

    class Renamed(GPT2Converter, model_type="gpt2_renamed"):
        pass

    assert (Renamed.model_type, Renamed.hf_prefix, Renamed.family) == (
        "gpt2_renamed",
        "GPT2",
        "decoder",
    )
    with pytest.raises(TypeError, match="unknown class-line key 'famliy'"):

        class Bad(Converter, famliy="decoder"):
            pass


def test_default_task_is_the_first_task_but_model_unless_set():
    lm, mlm = Task(head={"kind": "lm"}), Task(head={"kind": "mlm"})

    class Derived(Converter, model_type="derived"):
        tasks = {"Model": Task(head={"kind": "none"}), "ForCausalLM": lm, "ForMaskedLM": mlm}

    class Chosen(Derived, model_type="chosen", default_task="ForMaskedLM"):
        pass

    class Inherits(Chosen, model_type="inherits"):
        pass

    class OwnTasks(Chosen, model_type="own"):
        tasks = {"ForMaskedLM": mlm, "ForCausalLM": lm}

    assert [c.default_task for c in (Derived, Chosen, Inherits, OwnTasks)] == [
        "ForCausalLM",
        "ForMaskedLM",
        "ForMaskedLM",
        "ForMaskedLM",
    ]
