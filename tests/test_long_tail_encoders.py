"""The long tail's encoders, decoders and encoder-decoders of issue 33 that archzoo's parts
express (RoFormer, I-BERT, GTE, MPNet, RemBERT, ERNIE, ESM; XGLM, BioGPT; Blenderbot,
BlenderbotSmall, LED, Switch Transformers), each from a tiny perturbed transformers model
with a padded row: every task class transformers has for it
gives transformers' outputs within 1e-4 (and its loss within 1e-5, for the encoders), the
decoders and encoder-decoders generate transformers' greedy tokens with the cache. (Their
export round trip is tests/test_export.py's sweep of every registered type; their zoo
specs' counts are tests/test_zoo_counts.py's.)"""

from __future__ import annotations

import pytest
import torch
import transformers as hf
from hf_util import V, assert_greedy_equal, max_diff_unpadded, padded_batch, perturb, save_hf
from test_encoders import HEAD_KINDS, check_parity, labels_for, task_config
from test_seq2seq_family import restore_sinusoids
from test_seq2seq_tasks import eos_batch

import archzoo
from archzoo.hf.probe import model_class
from archzoo.parts.converter import ConversionError
from archzoo.parts.registry import get_registry
from archzoo.plugins.head.pooling import pool

LAYERS = dict(
    vocab_size=V,
    num_hidden_layers=2,
    hidden_size=32,
    num_attention_heads=4,
    intermediate_size=64,
    max_position_embeddings=64,
)
# model type -> (tiny config, its pad id, whether it has token types, the HF parameters
# archzoo computes instead of storing: RoFormer's sinusoid table, 64 rows x head_dim 8)
ENCODERS: dict[str, tuple[dict, int, bool, int]] = {
    "roformer": (dict(LAYERS, pad_token_id=0), 0, True, 64 * 8),
    "ibert": (dict(LAYERS, type_vocab_size=1, pad_token_id=1), 1, False, 0),
    "gte": (dict(LAYERS, type_vocab_size=2, pad_token_id=1), 1, True, 0),
    "mpnet": (dict(LAYERS, pad_token_id=1), 1, False, 0),
    "esm": (  # ESM-2's rotary positions and token dropout; its contact head is not imported
        dict(
            LAYERS,
            pad_token_id=1,
            mask_token_id=4,
            token_dropout=True,
            position_embedding_type="rotary",
        ),
        1,
        False,
        2 * 4 + 1,
    ),
    "ernie": (dict(LAYERS, use_task_id=True, task_type_vocab_size=3, pad_token_id=0), 0, True, 0),
    "rembert": (  # a 16-wide input embedding, a 48-wide MLM transform
        dict(LAYERS, input_embedding_size=16, output_embedding_size=48, pad_token_id=0),
        0,
        True,
        0,
    ),
}
BASE = ("Model", "ForMaskedLM", "ForSequenceClassification", "ForTokenClassification")
ENCODER_TASKS = {
    "roformer": (*BASE, "ForQuestionAnswering", "ForMultipleChoice"),
    "ibert": (*BASE, "ForQuestionAnswering", "ForMultipleChoice"),
    "gte": BASE,  # transformers has no QA or multiple-choice class for GTE
    "rembert": (*BASE, "ForQuestionAnswering", "ForMultipleChoice"),
    "mpnet": (*BASE, "ForQuestionAnswering", "ForMultipleChoice"),
    "esm": BASE,  # transformers has no QA or multiple-choice class for ESM
    "ernie": (*BASE, "ForQuestionAnswering", "ForMultipleChoice"),
}
# (type, task, extra config): RoFormer's E-wide embedding projected to d_model too
ENCODER_CASES = [(t, task, {}) for t, tasks in ENCODER_TASKS.items() for task in tasks] + [
    ("roformer", "ForMaskedLM", {"embedding_size": 24}),
    ("roformer", "Model", {"embedding_size": 48}),
    ("ernie", "ForMaskedLM", {"use_task_id": False}),  # BERT's layout: no task-type table
    # ESM-1b: learned positions counted from padding_idx + 1, an embedding norm
    ("esm", "ForMaskedLM", {"position_embedding_type": "absolute", "emb_layer_norm_before": True}),
]


def tiny_encoder(model_type: str, task: str, **over) -> torch.nn.Module:
    config = hf.AutoConfig.for_model(model_type, **{**ENCODERS[model_type][0], **over})
    torch.manual_seed(0)
    model = model_class(get_registry().converter(model_type), task, config, None)(config)
    perturb(model)
    restore_sinusoids(model)  # RoFormer's saved table stays the sinusoid it is computed as
    return model.eval()


def encoder_inputs(
    model_type: str, shape: tuple[int, ...], task_types: int = 0
) -> dict[str, torch.Tensor]:
    """Random ids, right padding after 5 tokens in the last row (of the last example),
    random token types where the type has them, random task types (ERNIE) where asked."""
    _, pad, token_types, _ = ENCODERS[model_type]
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(3, V, shape, generator=g)
    mask = torch.ones(shape, dtype=torch.long)
    mask[(-1,) * (len(shape) - 1)][5:] = 0
    out = {"input_ids": ids.masked_fill(mask == 0, pad), "attention_mask": mask}
    if token_types:
        out["token_type_ids"] = torch.randint(0, 2, shape, generator=g)
    if task_types:
        out["task_type_ids"] = torch.randint(0, task_types, shape, generator=g)
    return out


@pytest.mark.parametrize(("model_type", "task", "extra"), ENCODER_CASES)
def test_encoder_task_matches_transformers_outputs_and_loss(tmp_path, model_type, task, extra):
    problem = "single" if task == "ForSequenceClassification" else ""
    model = tiny_encoder(model_type, task, **task_config(task, problem, extra))
    shape = (2, 3, 9) if task == "ForMultipleChoice" else (2, 9)  # (B, C, T) or (B, T)
    # task types (ERNIE), but not for multiple choice: transformers' ErnieForMultipleChoice
    # passes them on unflattened, (B, C, T) against (B*C, T) rows
    tasks = 3 if model.config.to_dict().get("use_task_id") and shape == (2, 9) else 0
    feed = encoder_inputs(model_type, shape, tasks)
    if model_type == "esm":  # mask tokens (id 4) in both rows: token dropout rescales them
        feed["input_ids"][:, 2] = feed["input_ids"][0, 7] = 4
    labels = labels_for(task, problem, shape, feed["attention_mask"])
    ours_labels = labels.get("labels")
    if "start_positions" in labels:
        ours_labels = torch.stack([labels["start_positions"], labels["end_positions"]], -1)
    frozen = ENCODERS[model_type][3]
    ours = check_parity(tmp_path, model, feed, labels, ours_labels, unused=frozen)
    assert ours.spec.data["head"]["kind"] == HEAD_KINDS[task]
    assert ours.hf_source["model_type"] == model_type


def test_end_pooling_reads_the_last_place_padding_included(tmp_path):
    """RoFormer's sequence summary reads hidden[:, -1]: for a right-padded row that is a
    pad's state, where `last` reads the last real token's."""
    hidden = torch.randn(2, 5, 3)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    assert torch.equal(pool(hidden, mask, "end"), hidden[:, -1])
    assert torch.equal(pool(hidden, mask, "last")[1], hidden[1, 2])
    ours = archzoo.from_hf(save_hf(tiny_encoder("roformer", "ForMultipleChoice"), tmp_path))
    assert ours.spec.data["head"]["pooling"] == "end"


@pytest.mark.parametrize(
    ("model_type", "key", "value", "message"),
    [
        ("roformer", "rotary_value", True, "rotary_value=True is not supported"),
        ("ibert", "quant_mode", True, "quant_mode=True is not supported"),
        ("xglm", "pad_token_id", 5, "XGLM zeroes sinusoid row 5"),
    ],
)
def test_settings_archzoo_cannot_run_are_refused_by_name(model_type, key, value, message):
    conv = get_registry().converter(model_type)
    config = hf.AutoConfig.for_model(model_type).to_dict()
    with pytest.raises(ConversionError, match=message):
        conv.to_spec({**config, key: value})


BART = dict(
    vocab_size=V,
    d_model=32,
    encoder_layers=2,
    decoder_layers=2,
    encoder_attention_heads=4,
    decoder_attention_heads=4,
    encoder_ffn_dim=64,
    decoder_ffn_dim=64,
    max_position_embeddings=64,
    scale_embedding=True,
)
DECODERS = dict(vocab_size=V, max_position_embeddings=64)
# model type -> (tiny config, its task classes tested: the LM first)
GENERATIVE: dict[str, tuple[dict, tuple[str, ...]]] = {
    "xglm": (
        dict(DECODERS, d_model=32, num_layers=2, attention_heads=4, ffn_dim=64),
        ("ForCausalLM", "Model"),
    ),
    "biogpt": (
        dict(LAYERS, pad_token_id=1),
        ("ForCausalLM", "Model", "ForSequenceClassification", "ForTokenClassification"),
    ),
    "blenderbot": (  # its generation default blocks repeated encoder 3-grams: plain greedy here
        dict(BART, encoder_no_repeat_ngram_size=0),
        ("ForConditionalGeneration", "Model", "ForCausalLM"),
    ),
    "blenderbot-small": (BART, ("ForConditionalGeneration", "Model", "ForCausalLM")),
    "led": (  # a window of 4, shorter than the rows
        dict(
            {
                k: v
                for k, v in BART.items()
                if k not in ("max_position_embeddings", "scale_embedding")
            },
            max_encoder_position_embeddings=64,
            max_decoder_position_embeddings=32,
            attention_window=4,
        ),
        ("ForConditionalGeneration", "Model", "ForQuestionAnswering"),
    ),
}
GENERATIVE["pegasus_x"] = (  # blocks of 4 (rows of 10 padded to 12), every other staggered
    dict(
        {k: v for k, v in BART.items() if k != "scale_embedding"},
        encoder_layers=3,
        num_global_tokens=3,
        block_size=4,
    ),
    ("ForConditionalGeneration", "Model"),
)
GENERATIVE["switch_transformers"] = (  # layer 1 of each stack routed; 3 tokens per expert
    dict(
        vocab_size=V,
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=2,
        num_heads=4,
        num_decoder_layers=2,  # the config class's default is 12, not num_layers
        num_sparse_encoder_layers=1,
        num_sparse_decoder_layers=1,
        num_experts=4,
        expert_capacity=3,
        decoder_start_token_id=0,
    ),
    ("ForConditionalGeneration", "Model", "EncoderModel"),
)
GENERATIVE_CASES = [(t, task) for t, (_, tasks) in GENERATIVE.items() for task in tasks]


def tiny_generative(model_type: str, task: str) -> torch.nn.Module:
    config = hf.AutoConfig.for_model(model_type, **GENERATIVE[model_type][0])
    torch.manual_seed(0)
    model = model_class(get_registry().converter(model_type), task, config, None)(config)
    perturb(model, scale=0.1)
    return model.eval()


def output(out) -> torch.Tensor:
    for name in ("logits", "start_logits", "last_hidden_state"):
        if getattr(out, name, None) is not None:
            return getattr(out, name)
    raise AssertionError(f"no output to compare in {type(out).__name__}")


@pytest.mark.parametrize(("model_type", "task"), GENERATIVE_CASES)
def test_generative_task_matches_transformers_outputs(tmp_path, model_type, task):
    ref = tiny_generative(model_type, task)
    ours = archzoo.from_hf(save_hf(ref, tmp_path / model_type))
    assert ours.hf_source["model_type"] == model_type
    ids, mask = padded_batch(V)
    ids = ids.masked_fill(mask == 0, ref.config.pad_token_id)  # the classifier finds its pads
    batch = {"input_ids": ids, "attention_mask": mask}
    two_stacks = ours.family == "encoder-decoder"
    if two_stacks and task == "ForSequenceClassification":
        batch = eos_batch(ref.config.eos_token_id, ref.config.decoder_start_token_id)
    elif two_stacks:
        batch["decoder_input_ids"] = padded_batch(V, length=6)[0]
        mask = torch.ones_like(batch["decoder_input_ids"])  # compared on decoder positions
    with torch.no_grad():
        want, got = output(ref(**batch)), output(ours(**batch))
    assert got.shape == want.shape
    if got.dim() == 2:  # one row of scores per sequence
        mask, got, want = torch.ones(got.shape[0], 1, dtype=torch.long), got[:, None], want[:, None]
    assert max_diff_unpadded(got, want, mask) <= 1e-4
    seq2seq = get_registry().converter(model_type).family == "encoder-decoder"
    if not (seq2seq and task == "ForCausalLM"):  # its unused cross-attention is skipped
        assert ours.num_parameters() == sum(p.numel() for p in ref.parameters())


@pytest.mark.parametrize("model_type", list(GENERATIVE))
def test_greedy_generation_equals_transformers(tmp_path, model_type):
    ref = tiny_generative(model_type, GENERATIVE[model_type][1][0])
    ours = archzoo.from_hf(save_hf(ref, tmp_path / model_type))
    if not ref.config.is_encoder_decoder:
        return assert_greedy_equal(ref, ours)
    ids, mask = padded_batch(V, length=8, real=5)
    kwargs = {"max_new_tokens": 10, "min_new_tokens": 10, "do_sample": False}
    want = ref.generate(ids, attention_mask=mask, **kwargs)
    assert torch.equal(ours.generate(ids, attention_mask=mask, **kwargs), want)


def test_led_global_rows_match_transformers(tmp_path):
    """LED's encoder with global rows from `global_attention_mask` (their own q/k/v)."""
    ref = tiny_generative("led", "ForConditionalGeneration")
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "led"))
    ids, mask = padded_batch(V)
    glob = torch.zeros_like(ids)
    glob[:, 0] = glob[0, 7] = 1
    dec = padded_batch(V, length=6)[0]
    feed = {"input_ids": ids, "attention_mask": mask, "decoder_input_ids": dec}
    with torch.no_grad():
        want = ref(**feed, global_attention_mask=glob).logits
        got = ours(**feed, global_attention_mask=glob).logits
        plain = ours(**feed).logits
    assert (got - want).abs().max().item() <= 1e-4
    assert (got - plain).abs().max().item() > 1e-3  # the global rows change the numbers


def test_expert_capacity_drops_a_rows_later_tokens_as_a_dense_loop_does():
    """moe capacity: per row, an expert serves its first `capacity` tokens in order; a loop
    over the tokens is the reference."""
    from archzoo.plugins.ffn.moe import within_capacity

    g = torch.Generator().manual_seed(5)
    experts = torch.randint(0, 3, (4, 12), generator=g)
    want = torch.zeros(4, 12, dtype=torch.bool)
    for b in range(4):
        seen = [0, 0, 0]
        for t in range(12):
            seen[experts[b, t]] += 1
            want[b, t] = seen[experts[b, t]] <= 2
    assert torch.equal(within_capacity(experts, 3, 2).view(4, 12), want)
    assert not want.all()  # some tokens are dropped


def test_switch_capacity_changes_the_numbers_as_in_transformers(tmp_path):
    """With 3 tokens per expert a 10-token row drops tokens: archzoo's outputs still equal
    transformers', and differ from the same model without a capacity."""
    ref = tiny_generative("switch_transformers", "ForConditionalGeneration")
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "switch"))
    routed = [b.ffn for b in ours.encoder.blocks if b.ffn.name == "moe"]
    assert [f.cfg.capacity for f in routed] == [3]
    ids, mask = padded_batch(V)
    dec = padded_batch(V, length=6)[0]
    with torch.no_grad():
        got = ours(ids, attention_mask=mask, decoder_input_ids=dec).logits
        for f in (*routed, *(b.ffn for b in ours.decoder.blocks if b.ffn.name == "moe")):
            f.cfg.capacity = None
        unlimited = ours(ids, attention_mask=mask, decoder_input_ids=dec).logits
    assert (got - unlimited).abs().max().item() > 1e-3


def test_esm_token_dropout_scales_rows_by_their_masked_share():
    """Mask tokens' vectors are zero and each row is times 0.88 / (1 - masked / real tokens),
    the padding excluded (the formula of ESM's token dropout at inference, by hand)."""
    sizes = dict(vocab_size=V, d_model=16, n_layers=1, n_heads=2, d_ff=32, pad_token_id=1)
    plain = {"kind": "token", "type_vocab_size": 0, "norm": False}
    on = {**plain, "token_dropout": 0.12, "mask_token_id": 4}
    ours = archzoo.build_model("bert-base", {**sizes, "embedding": on, "position": "none"}).eval()
    ids = torch.tensor([[5, 4, 6, 7, 4, 8], [5, 4, 6, 1, 1, 1]])
    mask = (ids != 1).long()
    emb = ours.encoder.embedding
    with torch.no_grad():
        got = emb(ids, None, None, inputs={"attention_mask": mask})
        want = emb.word(ids).masked_fill((ids == 4)[..., None], 0.0)
    scale = torch.tensor([0.88 / (1 - 2 / 6), 0.88 / (1 - 1 / 3)])
    real = mask.bool()  # the padding's vectors are not the formula's
    assert torch.allclose(got[real], (want * scale[:, None, None])[real], atol=1e-6)


def test_esm_token_dropout_without_a_mask_token_is_refused():
    sizes = dict(vocab_size=V, d_model=16, n_layers=1, n_heads=2, d_ff=32)
    embedding = {"kind": "token", "token_dropout": 0.12}
    with pytest.raises(archzoo.SpecError, match="mask_token_id"):
        archzoo.build_model("bert-base", {**sizes, "embedding": embedding}, device="meta")
