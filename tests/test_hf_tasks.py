"""Headless and task checkpoints: every type's `...Model`, `...ForSequenceClassification`,
`...ForTokenClassification` and `...ForQuestionAnswering` import with HF's outputs and loss."""

from __future__ import annotations

import pytest
import torch
import transformers as hf
from hf_util import TINY, V, max_diff_unpadded, padded_batch, perturb, save_hf

import archzoo

PREFIX = {
    "gpt2": "GPT2",
    "bert": "Bert",
    "roberta": "Roberta",
    "albert": "Albert",
    "llama": "Llama",
    "mistral": "Mistral",
    "bloom": "Bloom",
    "gpt_neox": "GPTNeoX",
    "gpt_neo": "GPTNeo",
    "t5": "T5",
    "bart": "Bart",
}
SIZES = {
    **{t: base for t, (_, _, base) in TINY.items()},
    "albert": dict(
        num_hidden_layers=3,
        num_hidden_groups=3,
        embedding_size=16,
        hidden_size=32,
        num_attention_heads=4,
        intermediate_size=64,
    ),
    "mistral": dict(TINY["llama"][2], sliding_window=4),
    "gpt_neo": dict(
        num_layers=2,
        hidden_size=32,
        num_heads=4,
        attention_types=[[["global", "local"], 1]],
        window_size=4,
    ),
}
ENCODERS = ("bert", "roberta", "albert")  # token_type_ids where the type has them
DECODERS = ("gpt2", "gpt_neo", "gpt_neox", "llama", "mistral", "bloom")
PAD = 0  # padded positions hold this id (decoder classifiers find the last real token by it)
PADS = {"roberta": 1}  # types whose pad id is another (RoBERTa numbers positions around it)


def tiny(model_type: str, cls_suffix: str, **overrides) -> torch.nn.Module:
    """A perturbed tiny HF model of class `<Type><cls_suffix>` with pad id 0."""
    config_cls = getattr(hf, PREFIX[model_type] + "Config")
    sizes = {"vocab_size": V, "pad_token_id": PAD}
    if model_type not in ("bloom", "t5", "gpt2", "roberta"):
        sizes["max_position_embeddings"] = 64
    if model_type == "roberta":
        sizes["pad_token_id"] = PADS[model_type]  # RoBERTa's positions start after it
    config = config_cls(**{**sizes, **SIZES[model_type], **overrides})
    model = getattr(hf, PREFIX[model_type] + cls_suffix)(config)
    perturb(model)
    return model.eval()


def batch(model_type: str):
    ids, mask = padded_batch(V)
    ids = ids.masked_fill(mask == 0, PADS.get(model_type, PAD))
    extra = {}
    if model_type in ("bert", "albert"):
        g = torch.Generator().manual_seed(2)
        extra["token_type_ids"] = torch.randint(0, 2, ids.shape, generator=g)
    if model_type in ("t5", "bart"):
        dec, _ = padded_batch(V, length=7, real=7)
        extra["decoder_input_ids"] = dec
    return ids, mask, extra


def import_and_reload(tmp_path, model):
    """from_hf, then save and load: the same spec and bit-identical tensors."""
    ours = archzoo.from_hf(save_hf(model, tmp_path / "hf"))
    archzoo.save(ours, tmp_path / "m.safetensors")
    again = archzoo.load(tmp_path / "m.safetensors")
    assert again.spec == ours.spec
    a, b = ours.state_dict(), again.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    return ours, again


def same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal up to the last bits a kernel may change with the buffers' memory alignment
    (a 1-output matvec over mmap-read weights); the weights themselves are bit-identical."""
    return (a - b).abs().max().item() <= 1e-6


def run_both(ours, again, ids, mask, extra, **labels):
    with torch.no_grad():
        got = ours(ids, attention_mask=mask, **extra, **labels)
        reloaded = again(ids, attention_mask=mask, **extra, **labels)
    return got, reloaded


HEADLESS = [*ENCODERS, *DECODERS, "t5", "bart"]


@pytest.mark.parametrize("model_type", HEADLESS)
def test_base_model_gives_hf_hidden_states_and_pooler_output(tmp_path, model_type):
    model = tiny(model_type, "Model")
    ids, mask, extra = batch(model_type)
    ours, again = import_and_reload(tmp_path, model)
    assert ours.spec.data["head"]["kind"] == "none"
    with torch.no_grad():
        ref = model(input_ids=ids, attention_mask=mask, **extra)
    got, reloaded = run_both(ours, again, ids, mask, extra)
    out_mask = (
        mask if "decoder_input_ids" not in extra else torch.ones_like(extra["decoder_input_ids"])
    )
    assert max_diff_unpadded(ref.last_hidden_state, got.last_hidden_state, out_mask) <= 1e-4
    assert same(got.last_hidden_state, reloaded.last_hidden_state)
    if model_type in ENCODERS:  # BERT-style pooler kept, exposed as pooler_output
        assert (ref.pooler_output - got.pooler_output).abs().max().item() <= 1e-4
        assert same(got.pooler_output, reloaded.pooler_output)
    assert ours.num_parameters() == sum(p.numel() for p in model.parameters())


def test_bert_model_without_pooler_and_t5_encoder_model(tmp_path):
    model = hf.BertModel(hf.BertConfig(vocab_size=V, **SIZES["bert"]), add_pooling_layer=False)
    perturb(model)
    ours = archzoo.from_hf(save_hf(model.eval(), tmp_path / "bert"))
    assert ours.spec.data["head"] == {"kind": "none", "pooler": False, "project": None}
    ids, mask, _ = batch("bert")
    with torch.no_grad():
        ref, got = model(input_ids=ids, attention_mask=mask), ours(ids, attention_mask=mask)
    assert got.pooler_output is None
    assert max_diff_unpadded(ref.last_hidden_state, got.last_hidden_state, mask) <= 1e-4

    t5 = tiny("t5", "EncoderModel")
    ours = archzoo.from_hf(save_hf(t5, tmp_path / "t5"))
    assert ours.family == "encoder" and ours.decoder is None
    with torch.no_grad():
        ref, got = t5(input_ids=ids, attention_mask=mask), ours(ids, attention_mask=mask)
    assert max_diff_unpadded(ref.last_hidden_state, got.last_hidden_state, mask) <= 1e-4
    assert ours.num_parameters() == sum(p.numel() for p in t5.parameters())


SEQUENCE = [*ENCODERS, *DECODERS]
PROBLEMS = {
    "single": dict(num_labels=3),
    "regression": dict(num_labels=1),
    "multi": dict(num_labels=3, problem_type="multi_label_classification"),
}


def sequence_labels(problem: str, batch_size: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(3)
    if problem == "single":
        return torch.randint(0, 3, (batch_size,), generator=g)
    if problem == "regression":
        return torch.randn(batch_size, generator=g)
    return torch.randint(0, 2, (batch_size, 3), generator=g).float()


@pytest.mark.parametrize("problem", sorted(PROBLEMS))
@pytest.mark.parametrize("model_type", SEQUENCE)
def test_sequence_classification_matches_hf_logits_and_loss(tmp_path, model_type, problem):
    id2label = {i: f"class_{i}" for i in range(PROBLEMS[problem]["num_labels"])}
    model = tiny(model_type, "ForSequenceClassification", id2label=id2label, **PROBLEMS[problem])
    ids, mask, extra = batch(model_type)
    labels = sequence_labels(problem, ids.shape[0])
    ours, again = import_and_reload(tmp_path, model)
    head = ours.spec.data["head"]
    assert head["kind"] == "classifier" and head["labels"] == list(id2label.values())
    with torch.no_grad():
        ref = model(input_ids=ids, attention_mask=mask, labels=labels, **extra)
    got, reloaded = run_both(ours, again, ids, mask, extra, labels=labels)
    assert (ref.logits - got.logits).abs().max().item() <= 1e-4
    assert abs(ref.loss.item() - got.loss.item()) <= 1e-5
    assert same(got.logits, reloaded.logits)
    assert ours.num_parameters() == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("model_type", [*SEQUENCE, "t5"])
def test_token_classification_matches_hf_logits_and_loss(tmp_path, model_type):
    model = tiny(model_type, "ForTokenClassification", num_labels=5)
    ids, mask, extra = batch(model_type)
    extra.pop("decoder_input_ids", None)  # T5ForTokenClassification is its encoder
    g = torch.Generator().manual_seed(4)
    labels = torch.randint(0, 5, ids.shape, generator=g).masked_fill(mask == 0, -100)
    ours, again = import_and_reload(tmp_path, model)
    with torch.no_grad():
        ref = model(input_ids=ids, attention_mask=mask, labels=labels, **extra)
    got, reloaded = run_both(ours, again, ids, mask, extra, labels=labels)
    assert max_diff_unpadded(ref.logits, got.logits, mask) <= 1e-4
    assert abs(ref.loss.item() - got.loss.item()) <= 1e-5
    assert same(got.logits, reloaded.logits)
    assert ours.num_parameters() == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("model_type", [*SEQUENCE, "t5", "bart"])
def test_question_answering_matches_hf_span_logits_and_loss(tmp_path, model_type):
    # HF's span loss softmaxes over padded positions too; a padded GPT-Neo query whose local
    # window holds only padding has no key (archzoo: zeros, HF: a uniform average), so the
    # window here always reaches a real token
    over = {"window_size": 8} if model_type == "gpt_neo" else {}
    model = tiny(model_type, "ForQuestionAnswering", **over)
    ids, mask, extra = batch(model_type)
    start, end = torch.tensor([1, 2]), torch.tensor([4, 30])  # 30: outside, ignored as HF does
    ours, again = import_and_reload(tmp_path, model)
    assert ours.spec.data["head"]["kind"] == "question_answering"
    with torch.no_grad():
        ref = model(
            input_ids=ids, attention_mask=mask, start_positions=start, end_positions=end, **extra
        )
    got, reloaded = run_both(ours, again, ids, mask, extra, labels=torch.stack([start, end], -1))
    out_mask = (
        mask if "decoder_input_ids" not in extra else torch.ones_like(extra["decoder_input_ids"])
    )
    assert (
        max_diff_unpadded(ref.start_logits[..., None], got.start_logits[..., None], out_mask)
        <= 1e-4
    )
    assert max_diff_unpadded(ref.end_logits[..., None], got.end_logits[..., None], out_mask) <= 1e-4
    assert abs(ref.loss.item() - got.loss.item()) <= 1e-5
    assert same(got.start_logits, reloaded.start_logits)
    assert ours.num_parameters() == sum(p.numel() for p in model.parameters())


def test_architecture_a_type_does_not_have_is_named(tmp_path):
    model = tiny("gpt2", "DoubleHeadsModel")
    with pytest.raises(
        archzoo.ConversionError, match="GPT2DoubleHeadsModel.*supported: GPT2Model, GPT2LMHeadModel"
    ):
        archzoo.from_hf(save_hf(model, tmp_path / "hf"))


def test_without_architectures_the_tensors_decide(tmp_path):
    import json

    model = tiny("bert", "ForQuestionAnswering")
    directory = save_hf(model, tmp_path / "hf")
    config = json.loads((directory / "config.json").read_text())
    del config["architectures"]
    (directory / "config.json").write_text(json.dumps(config))
    assert archzoo.from_hf(directory).spec.data["head"]["kind"] == "question_answering"
