"""Spec loading: sources, extends, overrides, per-stack and per-layer keys, located errors."""

from __future__ import annotations

import textwrap

import pytest
from conftest import tiny

import archzoo
from archzoo import SpecError
from archzoo.specs.spec import parse_override

TINY = tiny(vocab_size=100, without=("dropout",))


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def issues_of(source, overrides=None):
    with pytest.raises(SpecError) as err:
        archzoo.load_spec(source, overrides)
    return err.value.issues


def test_resolved_spec_has_every_default_explicit():
    spec = archzoo.load_spec("gpt2")
    assert spec.data["attention"] == {
        "kind": "mha",
        "n_kv_heads": None,
        "fused_qkv": True,
        "bias": True,
        "out_bias": None,
        "scale": None,
        "use_position": True,  # added with SmolLM3's NoPE layers
        "qk_norm": "none",  # added with Qwen3 / OLMo 2
        "sinks": False,  # added with GPT-OSS
        "qk_norm_bias": True,  # added with StableLM
        "qkv_clamp": None,  # added with MPT (was clip_qkv)
        "softcap": None,  # added with Gemma 2
        "scale_at": "scores",  # added with OPT's bf16 order (was scale_query: false)
        "bias_add": "fused",  # added with Falcon's bf16 order (was bias_apart: false)
        "kv_heads_reach_kernel": "grouped",  # Falcon's multi-query call (was kv_broadcast)
        "q_groups": 1,  # added with SqueezeBERT's grouped projections
        "k_groups": 1,
        "v_groups": 1,
        "out_groups": 1,
        "qk_norm_after_position": False,  # added with HunYuan
        "value_width": None,  # added with MobileBERT's bottleneck block
        "qk_norm_scale": True,  # added with Llama 4 (its L2 norm: false)
        "temperature_floor": None,  # added with Llama 4's NoPE layers
        "temperature_scale": 0.1,
        "temperature_offset": 1,  # 0 with Ministral 3's i / original_max_position_embeddings
        "out_norm": False,  # added with BitNet (attn_sub_norm)
    }  # no kernel keys (eager, fused_bias): the kernel is a run-time choice (attention_impl=)
    assert spec.data["sharing"] == {"kind": "none"}
    assert spec.data["init_std"] == 0.02
    assert spec.data["extends"] is None


def test_resolved_spec_round_trips_through_yaml_and_rebuilds_same_architecture():
    spec = archzoo.load_spec("bert-base", overrides=TINY)
    again = archzoo.load_spec(spec.to_yaml())
    assert again == spec
    a = archzoo.build_model(spec, device="meta")
    b = archzoo.build_model(again, device="meta")
    shapes = {k: tuple(v.shape) for k, v in a.state_dict().items()}
    assert shapes == {k: tuple(v.shape) for k, v in b.state_dict().items()}


def test_sources_name_path_dict_text_and_spec(tmp_path):
    by_name = archzoo.load_spec("gpt2")
    path = write(tmp_path, "g.yaml", by_name.to_yaml())
    assert archzoo.load_spec(str(path)) == by_name
    assert archzoo.load_spec(path) == by_name
    assert archzoo.load_spec(by_name.to_dict()) == by_name
    assert archzoo.load_spec(by_name.to_yaml()) == by_name
    assert archzoo.load_spec(by_name) == by_name


ROPE_SCALING_DEFAULTS = {
    "scaling": "none",
    "factor": None,
    "original_max_len": None,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "beta_fast": 32.0,
    "beta_slow": 1.0,
    "mscale": None,
    "mscale_all_dim": None,
    "truncate": True,
    "attention_factor": None,
    "short_factor": None,
    "long_factor": None,
    "recache": False,  # added with Phi-3's cache recomputation
}


def test_extends_deep_merges_components_and_replaces_other_kinds(tmp_path):
    path = write(
        tmp_path,
        "child.yaml",
        """\
        extends: gpt2
        name: gpt2-rope-gqa
        position: {kind: rotary, base: 500000}
        attention: {n_kv_heads: 4}
        """,
    )
    spec = archzoo.load_spec(path)
    assert spec.name == "gpt2-rope-gqa"
    assert spec.data["position"] == {
        "kind": "rotary",
        "base": 500000,
        "fraction": 1.0,
        "interleaved": False,
        "rotate_fp32": False,  # added with bf16 parity: rotate in the queries' dtype
        "round_cos_sin": False,  # added with ModernBERT's bf16 cos/sin
        **ROPE_SCALING_DEFAULTS,  # added with RoPE scaling: off by default
    }
    # merged onto the base's mha: its params stay, n_kv_heads is added
    assert spec.data["attention"]["n_kv_heads"] == 4
    assert spec.data["attention"]["fused_qkv"] is True
    assert spec.data["n_layers"] == 12 and spec.data["d_model"] == 768


def test_extends_relative_path_and_cycle(tmp_path):
    (tmp_path / "sub").mkdir()
    write(tmp_path, "sub/base.yaml", archzoo.load_spec("gpt2", TINY).to_yaml())
    write(tmp_path, "sub/child.yaml", "extends: base.yaml\nn_layers: 3\n")
    assert archzoo.load_spec(tmp_path / "sub/child.yaml").data["n_layers"] == 3

    write(tmp_path, "a.yaml", "extends: b.yaml\nn_layers: 2\n")
    write(tmp_path, "b.yaml", "extends: a.yaml\n")
    (issue,) = issues_of(tmp_path / "a.yaml")
    assert "extends cycle" in issue.message
    assert issue.location.file.endswith("a.yaml") and issue.location.line == 1


def test_extends_missing_base_is_located(tmp_path):
    path = write(tmp_path, "c.yaml", "name: c\nextends: gpt-2\n")
    (issue,) = issues_of(path)
    assert "no spec file or zoo model named 'gpt-2'" in issue.message
    assert issue.suggestion == "gpt2"
    assert issue.location.line == 2


def test_dotted_overrides_and_cli_values():
    assert parse_override("attention.n_kv_heads=2") == ("attention.n_kv_heads", 2)
    assert parse_override("dropout=0.0") == ("dropout", 0.0)
    assert parse_override("position=rotary") == ("position", "rotary")
    spec = archzoo.load_spec("gpt2", {"n_layers": 2, "attention.n_kv_heads": 3})
    assert spec.data["n_layers"] == 2
    assert spec.data["attention"]["n_kv_heads"] == 3
    # a bare component name replaces the component (and its params) entirely
    spec = archzoo.load_spec("gpt2", {"position": "rotary"})
    assert spec.data["position"]["kind"] == "rotary"
    # a param of a component given by bare name turns it into a mapping
    spec = archzoo.load_spec(
        "gpt2", {"block": "post_ln", "position": "rotary", "position.base": 100}
    )
    assert spec.data["position"]["base"] == 100


def test_per_stack_sections_for_encoder_decoder():
    spec = archzoo.load_spec(
        {
            "name": "ed",
            "family": "encoder-decoder",
            **TINY,
            "head": "lm",
            "position": "sinusoidal",
            "encoder": {"n_layers": 3, "position": "learned"},
            "decoder": {"n_layers": 1, "ffn": {"activation": "relu"}},
        }
    )
    enc, dec = spec.stack("encoder"), spec.stack("decoder")
    assert (enc["n_layers"], dec["n_layers"]) == (3, 1)
    assert enc["position"]["kind"] == "learned" and dec["position"]["kind"] == "sinusoidal"
    assert dec["ffn"]["activation"] == "relu" and enc["ffn"]["activation"] == "gelu"
    model = archzoo.build_model(spec, device="meta")
    assert len(model.encoder.layer_map) == 3 and len(model.decoder.layer_map) == 1


def test_per_layer_overrides_alternate_components():
    spec = archzoo.load_spec(
        "gpt2",
        {
            **TINY,
            "n_layers": 4,
            "layers": [{"select": "1::2", "ffn": {"kind": "glu", "activation": "geglu"}}],
        },
    )
    kinds = [layer["ffn"]["kind"] for layer in spec.layer_components("decoder")]
    assert kinds == ["mlp", "glu", "mlp", "glu"]
    model = archzoo.build_model(spec)
    assert type(model.decoder.blocks[1].ffn).__name__ == "GLUFeedForward"
    assert type(model.decoder.blocks[0].ffn).__name__ == "MLPFeedForward"


def test_errors_are_collected_located_and_suggest(tmp_path):
    path = write(
        tmp_path,
        "bad.yaml",
        """\
        name: bad
        extends: gpt2
        n_layayers: 2
        attention: {kind: mhaa}
        ffn: {kind: mlp, activaton: relu}
        norm: {kind: layernorm, eps: -1}
        dropout: 1.5
        position: rotery
        """,
    )
    issues = issues_of(path)
    by_path = {i.path: i for i in issues}
    assert set(by_path) == {
        "n_layayers",
        "attention.kind",
        "ffn.activaton",
        "norm.eps",
        "dropout",
        "position.kind",
    }
    assert by_path["n_layayers"].suggestion == "n_layers"
    assert by_path["n_layayers"].location.line == 3
    assert by_path["attention.kind"].suggestion == "mha"
    assert by_path["ffn.activaton"].suggestion == "activation"
    assert by_path["ffn.activaton"].location.line == 5
    assert by_path["position.kind"].suggestion == "rotary"
    assert "must be > 0.0" in by_path["norm.eps"].message
    assert "must be < 1.0" in by_path["dropout"].message
    # sorted by position in the file, each line shows file:line:col
    assert [i.location.line for i in issues] == sorted(i.location.line for i in issues)
    assert f"{path}:3:1: n_layayers: unknown key (did you mean 'n_layers'?)" in str(
        archzoo.SpecError(issues)
    )


@pytest.mark.parametrize(
    "overrides, path, fragment",
    [
        ({"n_heads": 7}, "n_heads", "d_model 768 is not divisible by n_heads 7"),
        ({"attention.n_kv_heads": 5}, "attention.n_kv_heads", "not divisible by n_kv_heads 5"),
        (
            {"position": "rotary", "d_model": 36, "n_heads": 4},
            "position.kind",
            "needs an even head dimension, got head_dim 9",
        ),
        ({"head": "mlm"}, "head.kind", "does not fit a decoder model"),
        ({"encoder.n_layers": 3}, "encoder", "only for encoder-decoder models"),
        ({"n_layers": 0}, "n_layers", "must be >= 1"),
        ({"vocab_size": "big"}, "vocab_size", "must be an integer"),
        ({"d_model": 1_000_000, "n_heads": 1, "n_layers": 10_000}, "d_model", "absurd size"),
    ],
)
def test_cross_field_and_range_checks(overrides, path, fragment):
    issues = issues_of("gpt2", overrides)
    assert any(i.path == path and fragment in i.message for i in issues), issues


def test_unsafe_yaml_tag_is_refused_and_never_executed(tmp_path):
    marker = tmp_path / "pwned"
    text = f"name: x\nfoo: !!python/object/apply:os.system ['touch {marker}']\n"
    (issue,) = issues_of(text)
    assert "refused YAML tag" in issue.message and issue.location.line == 2
    assert not marker.exists()


def test_yaml_syntax_empty_non_mapping_and_non_utf8(tmp_path):
    (issue,) = issues_of("name: x\n  bad: [\n")
    assert "YAML syntax error" in issue.message and issue.location.line == 2
    empty = write(tmp_path, "empty.yaml", "")
    assert "empty" in issues_of(empty)[0].message
    assert "mapping at top level" in issues_of(write(tmp_path, "l.yaml", "- 1\n- 2\n"))[0].message
    raw = tmp_path / "latin1.yaml"
    raw.write_bytes(b"name: caf\xe9\n")
    (issue,) = issues_of(raw)
    assert "not UTF-8" in issue.message and issue.location.line == 1


def test_alias_bomb_is_refused_quickly():
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    (issue,) = issues_of("\n".join(lines) + "\n")
    assert "more than" in issue.message and "nodes" in issue.message
