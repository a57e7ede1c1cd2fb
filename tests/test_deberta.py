"""DeBERTa v1 (`deberta`) and v2/v3 (`deberta-v2`) against transformers: the disentangled
attention's c2p / p2c terms, log buckets, shared or own position projections and the
relative table's norm, every task head with HF's outputs and losses; tiny random models,
every parameter perturbed, a right-padded row and token types where the config has them."""

from __future__ import annotations

import json

import pytest
import torch
import transformers as hf
from click.testing import CliRunner
from hf_util import V, perturb, save_hf
from published_configs import PUBLISHED
from test_encoders import HEAD_KINDS, check_parity, labels_for
from test_encoders import LAYERS as ENCODER_LAYERS

import archzoo
from archzoo.cli.main import main
from archzoo.parts.converter import ConversionError

LAYERS = dict(ENCODER_LAYERS, max_position_embeddings=64, vocab_size=V, pad_token_id=0)
RELATIVE = dict(relative_attention=True, max_relative_positions=-1)
# name -> (HF class prefix, config): each flag of the disentangled attention on and off
CONFIGS: dict[str, tuple[str, dict]] = {
    "v1": ("Deberta", dict(LAYERS, **RELATIVE, pos_att_type="c2p|p2c", type_vocab_size=2)),
    "v1-absolute-c2p": (
        "Deberta",
        dict(LAYERS, **RELATIVE, pos_att_type=["c2p"], position_biased_input=True),
    ),
    "v1-no-relative": ("Deberta", dict(LAYERS, pos_att_type="p2c|c2p", type_vocab_size=2)),
    "v3": (  # deberta-v3's settings: buckets, shared keys, normalised table, no absolute
        "DebertaV2",
        dict(
            LAYERS,
            **RELATIVE,
            position_buckets=8,
            norm_rel_ebd="layer_norm",
            share_att_key=True,
            pos_att_type="p2c|c2p",
            position_biased_input=False,
        ),
    ),
    "v2-own-keys-c2p": (
        "DebertaV2",
        dict(
            LAYERS,
            relative_attention=True,
            max_relative_positions=6,  # clipped well inside the 10-token inputs
            share_att_key=False,
            pos_att_type=["c2p"],
            type_vocab_size=2,
        ),
    ),
    "v2-own-keys-buckets-p2c": (
        "DebertaV2",
        dict(
            LAYERS,
            relative_attention=True,
            position_buckets=4,
            max_relative_positions=16,
            pos_att_type="p2c",
        ),
    ),
}
TASKS_V1 = ("Model", "ForMaskedLM", "ForSequenceClassification", "ForTokenClassification")
TASKS = (*TASKS_V1, "ForQuestionAnswering", "ForMultipleChoice")
PROBLEMS = {
    "single": dict(num_labels=3),
    "regression": dict(num_labels=1),
    "multi": dict(num_labels=3, problem_type="multi_label_classification"),
}
CASES = [(name, suffix, "") for name in CONFIGS for suffix in ("Model", "ForMaskedLM")]
CASES += [  # every head, on one v1 and one v3 configuration
    (name, suffix, problem)
    for name in ("v1", "v3")
    for suffix in TASKS[2:]
    if not (name == "v1" and suffix == "ForMultipleChoice")  # HF has none for v1
    for problem in (tuple(PROBLEMS) if suffix == "ForSequenceClassification" else ("",))
]


def tiny(name: str, suffix: str, **overrides) -> torch.nn.Module:
    """A perturbed tiny HF DeBERTa of configuration `name` and class `<Prefix><suffix>`."""
    prefix, config = CONFIGS[name]
    model = getattr(hf, prefix + suffix)(getattr(hf, prefix + "Config")(**config, **overrides))
    perturb(model)
    return model.eval()


def inputs(name: str, shape: tuple[int, ...]) -> dict[str, torch.Tensor]:
    """Random ids, the last row (of the last example) padded after 5 tokens, token types
    when the configuration has them."""
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(3, V, shape, generator=g)
    mask = torch.ones(shape, dtype=torch.long)
    mask[(-1,) * (len(shape) - 1)][5:] = 0
    out = {"input_ids": ids.masked_fill(mask == 0, 0), "attention_mask": mask}
    if CONFIGS[name][1].get("type_vocab_size", 0) > 0:
        out["token_type_ids"] = torch.randint(0, 2, shape, generator=g)
    return out


def check(tmp_path, name: str, model: torch.nn.Module, suffix: str, problem: str = ""):
    """Outputs within 1e-4 of HF's at every position, padded ones included (zero_padded
    embeddings, uniform_padded attention: HF's padded query averages every value), and the
    `labels` loss within 1e-5 on the padded batch (a span loss softmaxes over padding too)."""
    shape = (2, 3, 10) if suffix == "ForMultipleChoice" else (2, 10)
    feed = inputs(name, shape)
    ours = check_parity(tmp_path, model, feed, {}, None)
    with torch.no_grad():
        ref, out = model(**feed), ours(**feed)
    for key in ("last_hidden_state", "logits", "start_logits", "end_logits"):
        if getattr(ref, key, None) is not None and getattr(out, key, None) is not None:
            assert (getattr(ref, key) - getattr(out, key)).abs().max().item() <= 1e-4, key
    labels = labels_for(suffix, problem, shape, feed["attention_mask"])
    ours_labels = labels.get("labels")
    if "start_positions" in labels:
        ours_labels = torch.stack([labels["start_positions"], labels["end_positions"]], -1)
    if labels:
        with torch.no_grad():
            want, got = model(**feed, **labels).loss, ours(**feed, labels=ours_labels).loss
        assert abs(want.item() - got.item()) <= 1e-5
    return ours


@pytest.mark.parametrize(("name", "suffix", "problem"), CASES)
def test_deberta_matches_hf_outputs_and_loss(tmp_path, name, suffix, problem):
    over = PROBLEMS.get(problem, {})
    if suffix == "ForTokenClassification":
        over = dict(num_labels=5)
    ours = check(tmp_path, name, tiny(name, suffix, **over), suffix, problem)
    assert ours.spec.data["head"]["kind"] == HEAD_KINDS[suffix]


def test_newer_mlm_head_imports_like_the_legacy_one(tmp_path):
    """`legacy: false` keeps the head under lm_predictions.lm_head (v3's checkpoints)."""
    check(tmp_path, "v3", tiny("v3", "ForMaskedLM", legacy=False), "ForMaskedLM")


def test_relative_table_settings_reach_the_spec(tmp_path):
    ours = archzoo.from_hf(save_hf(tiny("v3", "Model"), tmp_path / "hf"))
    position, attention = ours.spec.data["position"], ours.spec.data["attention"]
    assert position == {
        "kind": "deberta_relative",
        "max_distance": 64,
        "buckets": 8,
        "norm": True,
        "eps": 1e-7,
        "absolute": False,
    }
    assert attention["terms"] == ["c2p", "p2c"] and attention["share_key"] is True


@pytest.mark.parametrize(
    ("key", "value"),
    [("conv_kernel_size", 3), ("embedding_size", 16), ("pos_att_type", "c2p|p2p")],
)
def test_unsupported_settings_are_refused_naming_the_key(tmp_path, key, value):
    model = tiny("v3", "Model")
    model.config.update({key: value} if key != "embedding_size" else {})
    directory = save_hf(model, tmp_path / "hf")
    if key == "embedding_size":
        config = json.loads((directory / "config.json").read_text())
        (directory / "config.json").write_text(json.dumps({**config, key: value}))
    with pytest.raises(ConversionError, match=key):
        archzoo.from_hf(directory)


def test_position_needs_the_disentangled_attention(tiny_sizes):
    spec = {"family": "encoder", **tiny_sizes, "position": "deberta_relative"}
    with pytest.raises(Exception, match="'deberta_relative' is applied only by attention"):
        archzoo.build_model(spec)


@pytest.mark.parametrize("name", ["v1", "v1-absolute-c2p", "v3", "v2-own-keys-c2p"])
def test_export_round_trips_into_transformers(tmp_path, name):
    """to_hf writes the relative settings back: transformers loads every tensor, computes
    the same logits, and archzoo reads its own export back to the same spec and tensors."""
    ref = tiny(name, "ForMaskedLM")
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "hf"))
    report = archzoo.to_hf(ours, tmp_path / "out")
    assert report["architecture"] == type(ref).__name__
    back, info = type(ref).from_pretrained(tmp_path / "out", output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    feed = inputs(name, (2, 10))
    with torch.no_grad():
        diff = back.eval()(**feed).logits - ref(**feed).logits
    assert diff[feed["attention_mask"].bool()].abs().max().item() <= 1e-5
    again = archzoo.from_hf(tmp_path / "out")
    assert again.spec.data == {**ours.spec.data, "name": again.spec.name}
    a, b = ours.state_dict(), again.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_zoo_import_saves_the_model_hf_computes(tmp_path):
    model = tiny("v3", "ForSequenceClassification")
    out = tmp_path / "m.safetensors"
    args = ["import", str(save_hf(model, tmp_path / "hf")), "--out", str(out), "--json"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["params"] == sum(p.numel() for p in model.parameters())
    feed = inputs("v3", (2, 10))
    with torch.no_grad():
        diff = archzoo.load(out)(**feed).logits - model(**feed).logits
    assert diff.abs().max().item() <= 1e-4


@pytest.mark.parametrize("name", ["deberta-v3-base", "deberta-base"])
def test_zoo_spec_is_the_published_config_converted(name):
    """The zoo spec is what from_hf makes of the published config.json (name aside)."""
    config_name, kwargs = PUBLISHED[name]
    config = getattr(hf, config_name)(**kwargs).to_dict()
    converter = archzoo.get_registry().converter(config["model_type"])
    converted = archzoo.load_spec({**converter.to_spec(config), "name": name}).data
    assert converted == archzoo.load_spec(name).data
