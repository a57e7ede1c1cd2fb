"""A spec is resolved once (derived sizes explicit), validated once, and built from its plan."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from conftest import tiny
from hf_util import save_hf, tiny_hf

import archzoo
import archzoo.specs.spec as spec_module
from archzoo.cli.main import main
from archzoo.specs.plan import stack_role, stack_roles

TINY = tiny(vocab_size=100, without=("d_ff", "dropout"))


def test_loaded_spec_holds_derived_sizes_as_numbers():
    data = archzoo.load_spec("gpt2").data
    assert (data["head_dim"], data["d_ff"]) == (768 // 12, 4 * 768)
    assert data["attention_dropout"] == data["dropout"] == 0.1
    spec = archzoo.load_spec("gpt2", {"d_ff": 100, "attention_dropout": 0.0})
    assert (spec.data["d_ff"], spec.data["attention_dropout"]) == (100, 0.0)
    assert spec.derived == ("head_dim",)


def test_stack_sections_hold_the_sizes_that_differ_from_the_top():
    spec = archzoo.load_spec(
        "t5-small", {**TINY, "head_dim": None, "decoder.n_heads": 2, "encoder.dropout": 0.2}
    )
    assert spec.data["head_dim"] == 8
    assert spec.data["decoder"]["head_dim"] == 16  # 32 / 2 heads
    assert "head_dim" not in spec.data["encoder"]  # the top's 8
    assert spec.data["encoder"]["attention_dropout"] == 0.2  # follows the stack's dropout
    assert spec.stack("decoder")["head_dim"] == 16 and spec.stack("encoder")["head_dim"] == 8
    again = archzoo.load_spec(spec.to_yaml())
    assert again == spec
    a = archzoo.build_model(spec, device="meta")
    b = archzoo.build_model(again, device="meta")
    assert a.num_parameters() == b.num_parameters()
    assert [n for n, _ in a.named_parameters()] == [n for n, _ in b.named_parameters()]


def test_overrides_on_a_loaded_spec_recompute_what_was_derived():
    spec = archzoo.load_spec({**TINY, "family": "decoder"})
    assert (spec.data["head_dim"], spec.data["d_ff"]) == (8, 128)
    smaller = archzoo.load_spec(spec, {"d_model": 64, "n_heads": 4})
    assert (smaller.data["head_dim"], smaller.data["d_ff"]) == (16, 256)
    explicit = archzoo.load_spec("gpt2", {"head_dim": 32})
    assert archzoo.load_spec(explicit, {"n_heads": 4}).data["head_dim"] == 32


def test_saved_spec_round_trips_and_keeps_derived_keys_derived(tmp_path):
    model = archzoo.build_model("gpt2", {**TINY, "d_ff": 64})
    path = tmp_path / "m.safetensors"
    archzoo.save(model, path)
    loaded = archzoo.load(path)
    assert loaded.spec == model.spec and loaded.spec.derived == model.spec.derived
    assert loaded.spec.data["head_dim"] == 8


@pytest.fixture
def count_validations(monkeypatch):
    """Counts calls of the resolver (sources are read and validated there, once per load)."""
    calls = []
    real = spec_module.resolve

    def counting(*args, **kwargs):
        calls.append(args[0].get("name"))
        return real(*args, **kwargs)

    monkeypatch.setattr(spec_module, "resolve", counting)
    return calls


def test_build_validates_once(count_validations):
    spec = archzoo.load_spec("gpt2", TINY)
    assert len(count_validations) == 1
    archzoo.build_model(spec, device="meta")
    assert len(count_validations) == 1  # a validated Spec is built from its plan
    archzoo.build_model(spec, {"n_layers": 1}, device="meta")
    assert len(count_validations) == 2  # overrides make a new spec


def test_zoo_build_validates_once(count_validations):
    sets = [a for k, v in TINY.items() for a in ("--set", f"{k}={v}")]
    result = CliRunner().invoke(main, ["build", "gpt2", *sets])
    assert result.exit_code == 0, result.output
    assert count_validations == ["gpt2"]


def test_from_hf_and_load_validate_once(tmp_path, count_validations):
    model = archzoo.from_hf(save_hf(tiny_hf("gpt2"), tmp_path / "hf"))
    assert len(count_validations) == 1
    archzoo.save(model, tmp_path / "m.safetensors")
    archzoo.load(tmp_path / "m.safetensors")
    assert len(count_validations) == 2


def test_stack_roles_decide_causality_and_cross_attention_once():
    assert [(r.which, r.causal, r.cross) for r in stack_roles("encoder-decoder")] == [
        ("encoder", False, False),
        ("decoder", True, True),
    ]
    assert stack_role("decoder", "decoder").causal and not stack_role("encoder", "encoder").causal
    model = archzoo.build_model("t5-small", {**TINY, "head_dim": 8}, device="meta")
    assert (model.encoder.causal, model.decoder.causal) == (False, True)
    assert model.decoder.blocks[0].cross_attention is not None
    assert model.encoder.blocks[0].cross_attention is None
    plan = model.spec.plan
    assert [s.role for s in plan.stacks] == list(stack_roles("encoder-decoder"))


def test_unknown_component_error_is_composed_from_data():
    with pytest.raises(archzoo.SpecError) as err:
        archzoo.load_spec("gpt2", {"attention": {"kind": "mhaa"}})
    (issue,) = err.value.issues
    assert issue.suggestion == "mha"
    assert issue.message.startswith("unknown attention component 'mhaa'; known: ")
    assert "did you mean" not in issue.message
