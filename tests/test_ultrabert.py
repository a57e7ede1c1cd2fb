"""UltraBERT (ultrabert, issue 33): the mlm head's `bottleneck` (dense to a narrower width,
tanh-GELU, dense back, tanh-GELU, no norm, then the decoder) against the formula written out,
and every UltraBERT class from tiny perturbed transformers models with a padded row, sliding
layers whose window (|q - k| <= 2) is shorter than the rows and a rotary base per layer type:
masked LM, headless, sequence (cls and mean pooling), token and span classifiers within 1e-4;
the classifier exported back and loaded by transformers with equal logits. (The MLM's export
round trip: tests/test_export.py's sweep; the zoo spec's count: tests/test_zoo_counts.py.)"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
import transformers as hf
from hf_util import max_diff_unpadded, padded_batch, perturb, save_hf

import archzoo

V = 96
ULTRABERT = dict(
    vocab_size=V,
    hidden_size=32,
    intermediate_size=48,
    num_hidden_layers=3,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
    sliding_window=2,
    prediction_head_size=24,
    rms_norm_eps=1e-5,
    pad_token_id=0,
    rope_parameters={
        "sliding_attention": {"rope_type": "default", "rope_theta": 100.0},
        "full_attention": {"rope_type": "default", "rope_theta": 5000.0},
    },
)
TASKS = (
    "ForMaskedLM",
    "Model",
    "ForSequenceClassification",
    "ForTokenClassification",
    "ForQuestionAnswering",
)


def make(task: str, **config) -> torch.nn.Module:
    torch.manual_seed(0)
    cls = getattr(hf, "Ultrabert" + task)
    model = cls(hf.AutoConfig.for_model("ultrabert", **{**ULTRABERT, **config}))
    perturb(model, scale=0.1)
    return model.eval()


def output(out) -> torch.Tensor:
    for name in ("logits", "start_logits", "last_hidden_state"):
        if getattr(out, name, None) is not None:
            return getattr(out, name)
    raise AssertionError(f"no output in {type(out).__name__}")


def test_mlm_bottleneck_is_two_gelu_layers_without_a_norm():
    spec = {"vocab_size": V, "d_model": 16, "n_layers": 1, "n_heads": 2, "d_ff": 32}
    head = {"kind": "mlm", "bottleneck": 8, "activation": "gelu_tanh", "tie": False}
    model = archzoo.build_model("bert-base", {**spec, "head": head}).eval()
    perturb(model, scale=0.3)
    h = model.head
    assert h.norm is None  # no norm before the decoder
    assert (h.dense.weight.shape, h.dense_out.weight.shape) == ((8, 16), (16, 8))
    x = torch.randn(2, 5, 16)
    gelu = lambda t: F.gelu(t, approximate="tanh")  # noqa: E731
    mid = gelu(x @ h.dense.weight.T + h.dense.bias)  # (2, 5, 8)
    want = gelu(mid @ h.dense_out.weight.T + h.dense_out.bias) @ h.decoder.weight.T + h.decoder.bias
    with torch.no_grad():
        assert torch.allclose(h(x), want, atol=1e-5)


@pytest.mark.parametrize("task", TASKS)
def test_ultrabert_outputs_equal_transformers(tmp_path, task):
    ref = make(task)
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "ultrabert"))
    assert ours.hf_source["model_type"] == "ultrabert"
    assert ours.num_parameters() == sum(p.numel() for p in ref.parameters())
    ids, mask = padded_batch(V)
    with torch.no_grad():
        want, got = (
            output(ref(input_ids=ids, attention_mask=mask)),
            output(ours(ids, attention_mask=mask)),
        )
    if got.dim() == 2 and task == "ForSequenceClassification":  # one row per sequence
        got, want, mask = got[:, None], want[:, None], torch.ones(2, 1, dtype=torch.long)
    assert max_diff_unpadded(got, want, mask) <= 1e-4


def test_the_window_and_bases_are_what_the_numbers_depend_on(tmp_path):
    ref = make("Model")
    spec = archzoo.from_hf(save_hf(ref, tmp_path / "ultrabert")).spec.data
    (local,) = spec["layers"]
    assert (local["select"], local["attention"]["window"]) == ("0:2:1", 3)  # |q - k| < 3
    assert (local["position"]["base"], spec["position"]["base"]) == (100.0, 5000.0)


def test_mean_pooled_classifier_equals_transformers_and_exports_back(tmp_path):
    ref = make("ForSequenceClassification", classifier_pooling="mean")
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "ultrabert"))
    assert ours.spec.data["head"]["pooling"] == "mean"
    ids, mask = padded_batch(V)
    with torch.no_grad():
        want = ref(input_ids=ids, attention_mask=mask).logits
        assert (ours(ids, attention_mask=mask).logits - want).abs().max().item() <= 1e-4
    report = archzoo.to_hf(ours, tmp_path / "out")
    assert report["architecture"] == "UltrabertForSequenceClassification"
    back, info = hf.UltrabertForSequenceClassification.from_pretrained(
        tmp_path / "out", output_loading_info=True
    )
    assert not any(info.values()), info
    assert back.config.classifier_pooling == "mean" and back.config.sliding_window == 2
    with torch.no_grad():
        got = back.eval()(input_ids=ids, attention_mask=mask).logits
    assert (got - want).abs().max().item() <= 1e-5
