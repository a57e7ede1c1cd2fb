"""Text types the coverage sweep had left "not examined" (issue 33), each from a tiny perturbed
transformers model with a padded row: every task class transformers has for it gives
transformers' outputs within 1e-4 (and its loss within 1e-5, for the encoders); the decoders
generate transformers' greedy tokens with the cache. (Their export round trip is
tests/test_export.py's sweep of every registered type; their zoo specs' counts are
tests/test_zoo_counts.py's.)"""

from __future__ import annotations

import pytest
import torch
import transformers as hf
from hf_util import V, assert_greedy_equal, max_diff_unpadded, padded_batch, perturb, save_hf
from test_encoders import HEAD_KINDS, check_parity, labels_for, task_config

import archzoo
from archzoo.hf.probe import model_class
from archzoo.parts.converter import ConversionError
from archzoo.parts.registry import get_registry

LAYERS = dict(
    vocab_size=V,
    num_hidden_layers=2,
    hidden_size=32,
    num_attention_heads=4,
    intermediate_size=64,
    max_position_embeddings=64,
)
# model type -> (tiny config, its pad id)
ENCODERS: dict[str, tuple[dict, int]] = {
    "eurobert": (dict(LAYERS, num_key_value_heads=2, pad_token_id=0, mlp_bias=True), 0),
    "esmc": (dict(LAYERS, pad_token_id=1), 1),  # residuals divided by sqrt(2 / 36)
    "bert-generation": (dict(LAYERS, pad_token_id=0), 0),  # is_decoder false: bidirectional
}
BASE = ("Model", "ForMaskedLM", "ForSequenceClassification", "ForTokenClassification")
# (type, task, extra config)
ENCODER_CASES = [
    *((t, task, {}) for t in ENCODERS for task in BASE if t != "bert-generation"),
    ("bert-generation", "Encoder", {}),  # its only class with is_decoder false
    ("eurobert", "ForSequenceClassification", {"classifier_pooling": "bos"}),
    ("eurobert", "ForSequenceClassification", {"classifier_pooling": "mean"}),
    ("eurobert", "ForMaskedLM", {"mlp_bias": False, "tie_word_embeddings": True}),
]


def tiny_encoder(model_type: str, task: str, **over) -> torch.nn.Module:
    config = hf.AutoConfig.for_model(model_type, **{**ENCODERS[model_type][0], **over})
    torch.manual_seed(0)
    model = model_class(get_registry().converter(model_type), task, config, None)(config)
    perturb(model)
    return model.eval()


def encoder_inputs(model_type: str, shape: tuple[int, ...]) -> dict[str, torch.Tensor]:
    """Random ids, right padding after 5 tokens in the last row."""
    pad = ENCODERS[model_type][1]
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(3, V, shape, generator=g)
    mask = torch.ones(shape, dtype=torch.long)
    mask[-1, 5:] = 0
    return {"input_ids": ids.masked_fill(mask == 0, pad), "attention_mask": mask}


@pytest.mark.parametrize(("model_type", "task", "extra"), ENCODER_CASES)
def test_encoder_task_matches_transformers_outputs_and_loss(tmp_path, model_type, task, extra):
    problem = "single" if task == "ForSequenceClassification" else ""
    model = tiny_encoder(model_type, task, **task_config(task, problem, extra))
    feed = encoder_inputs(model_type, (2, 9))
    labels = labels_for(task, problem, (2, 9), feed["attention_mask"])
    ours = check_parity(tmp_path, model, feed, labels, labels.get("labels"))
    assert ours.spec.data["head"]["kind"] == {**HEAD_KINDS, "Encoder": "none"}[task]
    assert ours.hf_source["model_type"] == model_type


def test_late_pooling_averages_every_real_tokens_scores():
    """classifier pool_scores: the scores of every token (pooler, then classifier), their mean
    over the real tokens, by hand."""
    sizes = dict(vocab_size=V, d_model=16, n_layers=1, n_heads=2, d_ff=32)
    head = {"kind": "classifier", "num_labels": 3, "pooling": "mean", "pool_scores": True}
    ours = archzoo.build_model("bert-base", {**sizes, "head": head}).eval()
    hidden = torch.randn(2, 5, 16)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    h = ours.head
    with torch.no_grad():
        got = h(hidden, mask)
        scores = h.classifier(torch.tanh(h.pooler(hidden)))  # (B, T, 3)
    want = torch.stack([scores[0].mean(0), scores[1, :3].mean(0)])
    assert torch.allclose(got, want, atol=1e-6)


@pytest.mark.parametrize(("model_type", "task"), [("eurobert", "ForSequenceClassification")])
def test_task_head_exports_as_its_architecture(tmp_path, model_type, task):
    """to_hf writes the head's architecture and settings back (EuroBERT's late pooling):
    transformers loads it with nothing missing and gives the same scores."""
    problem = "single" if task == "ForSequenceClassification" else ""
    ref = tiny_encoder(model_type, task, **task_config(task, problem))
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "hf"))
    report = archzoo.to_hf(ours, tmp_path / "out")
    assert report["architecture"] == type(ref).__name__
    back, info = type(ref).from_pretrained(tmp_path / "out", output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    feed = encoder_inputs(model_type, (2, 9))
    with torch.no_grad():
        assert (ref(**feed).logits - back.eval()(**feed).logits).abs().max().item() <= 1e-5


def test_eurobert_refuses_a_pooling_it_does_not_know():
    conv = get_registry().converter("eurobert")
    config = {**hf.AutoConfig.for_model("eurobert").to_dict(), "classifier_pooling": "max"}
    config["architectures"] = ["EuroBertForSequenceClassification"]
    with pytest.raises(ConversionError, match="classifier_pooling='max' is not supported"):
        conv.to_spec(config)


# model type -> (tiny config, its task classes tested: the LM first)
GENERATIVE: dict[str, tuple[dict, tuple[str, ...]]] = {
    "gpt_neox_japanese": (  # half of each head rotated; the last layer's output bias
        dict(
            vocab_size=V,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_multiple_size=2,
            max_position_embeddings=64,
            rotary_pct=0.5,
        ),
        ("ForCausalLM", "Model"),
    ),
    "bert-generation": (  # is_decoder: causal, an LM head with a bias, tied
        dict(LAYERS, is_decoder=True, pad_token_id=0),
        ("Decoder", "Encoder"),
    ),
}
GENERATIVE_CASES = [(t, task) for t, (_, tasks) in GENERATIVE.items() for task in tasks]


def tiny_generative(model_type: str, task: str) -> torch.nn.Module:
    config = hf.AutoConfig.for_model(model_type, **GENERATIVE[model_type][0])
    torch.manual_seed(0)
    model = model_class(get_registry().converter(model_type), task, config, None)(config)
    perturb(model, scale=0.1)
    return model.eval()


def output(out) -> torch.Tensor:
    for name in ("logits", "last_hidden_state"):
        if getattr(out, name, None) is not None:
            return getattr(out, name)
    raise AssertionError(f"no output to compare in {type(out).__name__}")


@pytest.mark.parametrize(("model_type", "task"), GENERATIVE_CASES)
def test_generative_task_matches_transformers_outputs(tmp_path, model_type, task):
    ref = tiny_generative(model_type, task)
    ours = archzoo.from_hf(save_hf(ref, tmp_path / model_type))
    assert ours.hf_source["model_type"] == model_type
    ids, mask = padded_batch(V)
    pad = ref.config.pad_token_id or 0
    batch = {"input_ids": ids.masked_fill(mask == 0, pad), "attention_mask": mask}
    with torch.no_grad():
        want, got = output(ref(**batch)), output(ours(**batch))
    assert got.shape == want.shape
    if got.dim() == 2:  # one row of scores per sequence
        mask, got, want = torch.ones(got.shape[0], 1, dtype=torch.long), got[:, None], want[:, None]
    assert max_diff_unpadded(got, want, mask) <= 1e-4
    assert ours.num_parameters() == sum(p.numel() for p in ref.parameters())


@pytest.mark.parametrize("model_type", list(GENERATIVE))
def test_greedy_generation_equals_transformers(tmp_path, model_type):
    ref = tiny_generative(model_type, GENERATIVE[model_type][1][0])
    ours = archzoo.from_hf(save_hf(ref, tmp_path / model_type))
    assert_greedy_equal(ref, ours)


def test_bert_generation_lm_head_without_is_decoder_is_refused():
    """BertGenerationDecoder with is_decoder false (transformers warns) is a bidirectional
    encoder under an LM head: refused by name rather than imported as a decoder."""
    conv = get_registry().converter("bert-generation")
    config = {**hf.AutoConfig.for_model("bert-generation").to_dict(), "is_decoder": False}
    config["architectures"] = ["BertGenerationDecoder"]
    with pytest.raises(ConversionError, match="with is_decoder=False .* is not supported"):
        conv.to_spec(config)
    config["is_decoder"] = True
    assert conv.to_spec(config)["family"] == "decoder"
