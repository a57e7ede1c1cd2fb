"""XLM against transformers: language embeddings fed by `langs`, token types read from the
token table, learned or sinusoid-filled positions, GELU or ReLU, post-LN, the MLM head (a
tied projection with a bias), the CLM variant (`causal`: a decoder whose loss is unshifted),
and the task heads; tiny random models, every parameter perturbed, a right-padded row."""

from __future__ import annotations

import pytest
import torch
import transformers as hf
from hf_util import NO_LANGUAGE_ADAPTERS, V, max_diff_unpadded, perturb, save_hf
from test_encoders import check_parity, task_config, task_parity, zoo_import

import archzoo
from archzoo.parts.converter import ConversionError
from archzoo.parts.hf_tensors import ZooNames

TINY = dict(vocab_size=V, emb_dim=32, n_layers=2, n_heads=4, max_position_embeddings=64)
IDS = dict(pad_token_id=2, bos_token_id=0, eos_token_id=1, n_langs=3)
# HF class suffix -> the role its labels and head kind have in tests/test_encoders.py
ROLE = {"WithLMHeadModel": "ForMaskedLM", "ForQuestionAnsweringSimple": "ForQuestionAnswering"}
CASES = [
    ("Model", "", {}),
    ("WithLMHeadModel", "", {}),
    ("WithLMHeadModel", "", dict(sinusoidal_embeddings=True, gelu_activation=False)),
    ("WithLMHeadModel", "", dict(n_langs=1)),  # one language: no table, no langs input
    *[("ForSequenceClassification", p, {}) for p in ("single", "regression", "multi")],
    ("ForTokenClassification", "", {}),
    ("ForMultipleChoice", "", {}),  # summary then logits_proj: one linear per choice
]


def tiny(suffix: str, **overrides) -> torch.nn.Module:
    """A perturbed tiny `XLM<suffix>`."""
    model = getattr(hf, "XLM" + suffix)(hf.XLMConfig(**{**TINY, **IDS, **overrides}))
    perturb(model)
    return model.eval()


def inputs(n_langs: int = 3, shape: tuple[int, ...] = (2, 9)) -> dict[str, torch.Tensor]:
    """Random ids, language ids (when the model has several) and token types (any token
    id: XLM embeds them with its token table); the last row right-padded after 5 tokens."""
    g = torch.Generator().manual_seed(1)
    mask = torch.ones(shape, dtype=torch.long)
    mask[(-1,) * (len(shape) - 1)][5:] = 0
    ids = torch.randint(3, V, shape, generator=g).masked_fill(mask == 0, IDS["pad_token_id"])
    feed = {"input_ids": ids, "attention_mask": mask}
    feed["token_type_ids"] = torch.randint(0, V, shape, generator=g)
    if n_langs > 1:
        feed["langs"] = torch.randint(0, n_langs, shape, generator=g)
    return feed


def composed(model: torch.nn.Module) -> int:
    """HF parameters beyond the one linear archzoo makes of the multiple-choice summary and
    logits_proj (0 for the other heads)."""
    if not hasattr(model, "logits_proj"):
        return 0
    layers = (model.sequence_summary.summary, model.logits_proj)
    width = layers[0].in_features
    return sum(p.numel() for layer in layers for p in layer.parameters()) - (width + 1)


@pytest.mark.parametrize(("suffix", "problem", "over"), CASES)
def test_task_matches_hf_outputs_and_loss(tmp_path, suffix, problem, over):
    role = ROLE.get(suffix, suffix)
    model = tiny(suffix, **task_config(role, problem, over))
    feed = inputs(model.config.n_langs, (2, 3, 9) if suffix == "ForMultipleChoice" else (2, 9))
    ours = task_parity(tmp_path, model, role, problem, feed, composed(model))
    assert ours.spec.data["embedding"]["n_langs"] == (0 if model.config.n_langs == 1 else 3)
    if "sinusoidal_embeddings" in over:
        assert ours.spec.data["ffn"]["activation"] == "relu"


def test_causal_xlm_is_a_decoder_with_hf_logits_and_unshifted_loss(tmp_path):
    model = tiny("WithLMHeadModel", causal=True)
    feed = inputs()
    labels = feed["input_ids"].masked_fill(feed["attention_mask"] == 0, -100)
    ours = check_parity(tmp_path, model, feed, {"labels": labels}, labels)
    assert ours.family == "decoder"
    assert ours.spec.data["head"] == {**ours.spec.data["head"], "kind": "lm", "shift": False}


def test_question_answering_matches_hf_span_logits_and_loss(tmp_path):
    """Span logits and the span loss on a padded batch (XLM zeroes the hidden states of
    padded positions, `zero_padded` blocks do too: the logits there are the bias), and the
    loss on an unpadded one."""
    model = tiny("ForQuestionAnsweringSimple")
    padded, full = inputs(), {**inputs(), "attention_mask": torch.ones(2, 9, dtype=torch.long)}
    positions = {"start_positions": torch.tensor([1, 2]), "end_positions": torch.tensor([4, 30])}
    labels = torch.stack(list(positions.values()), -1)
    ours = check_parity(tmp_path / "padded", model, padded, positions, labels)
    with torch.no_grad():
        ref, got = model(**padded), ours(**padded)
    for name in ("start_logits", "end_logits"):  # padded positions included
        assert (getattr(ref, name) - getattr(got, name)).abs().max().item() <= 1e-4
    ours = check_parity(tmp_path / "full", model, full, positions, labels)
    assert ours.spec.data["head"]["kind"] == "question_answering"
    assert ours.spec.data["block"] == {
        "kind": "post_ln",
        "zero_padded": True,
        **NO_LANGUAGE_ADAPTERS,
    }


def test_langs_change_the_output_and_are_refused_without_a_table(tmp_path):
    ours = archzoo.from_hf(save_hf(tiny("Model"), tmp_path / "hf"))
    feed = inputs()
    with torch.no_grad():
        a = ours(**feed).last_hidden_state
        b = ours(**{**feed, "langs": (feed["langs"] + 1) % 3}).last_hidden_state
    assert max_diff_unpadded(a, b, feed["attention_mask"]) > 1e-3
    single = archzoo.from_hf(save_hf(tiny("Model", n_langs=1), tmp_path / "one"))
    with pytest.raises(ValueError, match=r"langs were given, but .* no language embeddings"):
        single(**feed)
    with pytest.raises(ValueError, match="langs .* language ids"):
        ours(**{**feed, "langs": feed["langs"] + 3})


@pytest.mark.parametrize(
    ("suffix", "over", "message"),
    [
        ("WithLMHeadModel", dict(asm=True), "asm=True is not supported"),
        ("ForSequenceClassification", dict(summary_type="mean"), "summary_type='mean'"),
        ("ForQuestionAnswering", {}, "XLMForQuestionAnsweringSimple"),
    ],
)
def test_unsupported_settings_are_refused_naming_the_key(tmp_path, suffix, over, message):
    config = hf.XLMConfig(**{**TINY, **IDS, **over}, architectures=["XLM" + suffix])
    directory = tmp_path / "hf"
    directory.mkdir()
    config.save_pretrained(directory)
    converter = archzoo.get_registry().converter("xlm")
    with pytest.raises(ConversionError, match=message):
        converter.to_spec(config.to_dict())


def test_zoo_import_saves_the_model_hf_computes(tmp_path):
    model = tiny("WithLMHeadModel")
    out = zoo_import(tmp_path, model)
    feed = inputs()
    with torch.no_grad():
        got, want = archzoo.load(out)(**feed).logits, model(**feed).logits
    assert max_diff_unpadded(got, want, feed["attention_mask"]) <= 1e-4


def test_multiple_choice_exports_its_one_linear_back_to_transformers(tmp_path):
    """The table run backwards writes the composed summary + logits_proj through a 2-wide
    summary (num_labels' default); transformers computes the same choice logits from it."""
    model = tiny("ForMultipleChoice")
    ours = archzoo.from_hf(save_hf(model, tmp_path / "hf"))
    converter = archzoo.get_registry().converter("xlm")
    state = converter.export_state(
        ours.state_dict(), ZooNames.of(ours), ours.spec.data, task="ForMultipleChoice"
    )
    back = hf.XLMForMultipleChoice(hf.XLMConfig(**{**TINY, **IDS})).eval()
    back.load_state_dict(state, strict=True)
    feed = inputs(3, (2, 3, 9))
    with torch.no_grad():
        diff = (back(**feed).logits - model(**feed).logits).abs().max().item()
    assert diff <= 1e-5
