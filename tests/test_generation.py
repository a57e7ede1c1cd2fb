"""Generation: token-for-token equality with transformers' generate, cache and sampling rules."""

from __future__ import annotations

import pytest
import torch
import transformers as hf
from hf_util import V, perturb, save_hf, tiny_hf

import archzoo

DECODERS = {
    "gpt2": lambda: tiny_hf("gpt2", eos_token_id=5, bos_token_id=5),
    "llama": lambda: tiny_hf("llama", eos_token_id=5, pad_token_id=0),
}
SEQ2SEQ = {
    "t5": lambda: tiny_hf("t5", eos_token_id=5, decoder_start_token_id=0),
    "bart": lambda: tiny_hf("bart"),
}


def pair(tmp_path, name):
    model = {**DECODERS, **SEQ2SEQ}[name]()
    perturb(model, scale=0.2)  # sharper distributions: greedy/beam choices are not near-ties
    model.eval()
    ours = archzoo.from_hf(save_hf(model, tmp_path / name))
    return model, ours


def prompts(seq2seq: bool):
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(6, V, (2, 7), generator=g)
    mask = torch.ones_like(ids)
    if not seq2seq:  # left padding, as decoder-only generation expects
        mask[1, :3] = 0
        ids[1, :3] = 0
    else:
        mask[1, 5:] = 0
    return ids, mask


@pytest.mark.parametrize("name", sorted(DECODERS) + sorted(SEQ2SEQ))
def test_greedy_equals_hf_and_no_cache_path(tmp_path, name):
    ref_model, ours = pair(tmp_path, name)
    ids, mask = prompts(name in SEQ2SEQ)
    kwargs = {"max_new_tokens": 20, "min_new_tokens": 20}
    expected = ref_model.generate(ids, attention_mask=mask, do_sample=False, **kwargs)
    got = ours.generate(ids, attention_mask=mask, **kwargs)
    assert torch.equal(got, expected), (got, expected)
    assert torch.equal(ours.generate(ids, attention_mask=mask, use_cache=False, **kwargs), got)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_greedy_ties_and_rows_ending_early_equal_hf(tmp_path, dtype):
    """Every token above V/2 scores exactly as one below it (duplicated output rows), so
    greedy must take the first maximal score as transformers' argmax over fp32 does; the eos
    is a token one row picks a few steps in, so rows finish apart and then read pad."""
    torch.manual_seed(0)
    ref_model = tiny_hf("gpt2", eos_token_id=5, bos_token_id=5)
    perturb(ref_model, scale=0.2)
    with torch.no_grad():  # the LM head is tied to the token table
        table = ref_model.transformer.wte.weight
        table[V // 2 :] = table[: V - V // 2].clone()
    ref_model.eval()
    path = save_hf(ref_model, tmp_path / "gpt2")
    ref_model = hf.GPT2LMHeadModel.from_pretrained(path, dtype=dtype).eval()
    ours = archzoo.from_hf(path, dtype=dtype)
    ids, mask = prompts(False)
    free = ref_model.generate(
        ids, attention_mask=mask, do_sample=False, max_new_tokens=12, min_new_tokens=12
    )
    assert torch.equal(
        ours.generate(ids, attention_mask=mask, max_new_tokens=12, min_new_tokens=12), free
    )
    assert int(free[:, 7:].max()) < V // 2  # ties were there to break: none broke upwards
    rows = free[:, 7:].tolist()
    ends, eos = next(  # a token one row first picks some steps in and the other never
        (r, t)
        for r, row in enumerate(rows)
        for i, t in enumerate(row)
        if i and t not in row[:i] + rows[1 - r]
    )
    kwargs = {"max_new_tokens": 12, "eos_token_id": eos, "pad_token_id": 1}
    expected = ref_model.generate(ids, attention_mask=mask, do_sample=False, **kwargs)
    got = ours.generate(ids, attention_mask=mask, **kwargs)
    assert torch.equal(got, expected), (got, expected)
    assert got.shape[1] == 7 + 12  # the other row ran on, the ended one was padded
    assert (got[ends, 7:] == 1).any() and not (got[1 - ends, 7:] == 1).any()


@pytest.mark.parametrize("name", ["gpt2", "t5"])
def test_beam_search_equals_hf(tmp_path, name):
    ref_model, ours = pair(tmp_path, name)
    ids, mask = prompts(name in SEQ2SEQ)
    for kwargs in (
        {"num_beams": 4, "max_new_tokens": 12},
        {"num_beams": 4, "max_new_tokens": 12, "length_penalty": 0.5, "early_stopping": True},
    ):
        expected = ref_model.generate(ids, attention_mask=mask, do_sample=False, **kwargs)
        got = ours.generate(ids, attention_mask=mask, **kwargs)
        assert torch.equal(got, expected), (kwargs, got, expected)
    got_nc = ours.generate(
        ids, attention_mask=mask, num_beams=4, max_new_tokens=12, use_cache=False
    )
    assert torch.equal(
        got_nc, ours.generate(ids, attention_mask=mask, num_beams=4, max_new_tokens=12)
    )


def test_left_padded_rows_get_the_tokens_they_get_alone(tmp_path):
    _, ours = pair(tmp_path, "llama")
    ids, mask = prompts(False)
    both = ours.generate(ids, attention_mask=mask, max_new_tokens=10, min_new_tokens=10)
    alone = ours.generate(ids[1:, 3:], max_new_tokens=10, min_new_tokens=10)
    assert torch.equal(both[1, 3:], alone[0])


def test_sampling_is_reproducible_and_top_k_1_is_greedy(tmp_path):
    _, ours = pair(tmp_path, "gpt2")
    ids, mask = prompts(False)
    runs = [
        ours.generate(
            ids,
            attention_mask=mask,
            do_sample=True,
            top_p=0.9,
            temperature=0.8,
            max_new_tokens=15,
            generator=torch.Generator().manual_seed(7),
        )
        for _ in range(2)
    ]
    assert torch.equal(runs[0], runs[1])
    greedy = ours.generate(ids, attention_mask=mask, max_new_tokens=15, min_new_tokens=15)
    top1 = ours.generate(
        ids,
        attention_mask=mask,
        do_sample=True,
        top_k=1,
        max_new_tokens=15,
        min_new_tokens=15,
        generator=torch.Generator().manual_seed(1),
    )
    assert torch.equal(top1, greedy)


def seeded_draws(tmp_path, **kwargs) -> tuple[torch.Tensor, torch.Tensor]:
    """8 sampled tokens from transformers' GPT-2 and archzoo's, each from global seed 7."""
    ref_model, ours = pair(tmp_path, "gpt2")
    ids, mask = prompts(False)
    runs = []
    for model in (ref_model, ours):
        torch.manual_seed(7)
        runs.append(
            model.generate(ids, attention_mask=mask, do_sample=True, max_new_tokens=8, **kwargs)
        )
    return runs[0], runs[1]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"top_k": 1},  # transformers keeps two tokens per beam (one besides the eos)
        {"top_k": 2, "eos_token_id": [5, 9]},  # three: one besides each eos
        {"top_k": 50, "top_p": 0.3},
    ],
)
def test_beam_sampling_draws_what_transformers_draws(tmp_path, kwargs):
    """Beam sampling from the same global seed: transformers' warpers keep at least
    len(eos) + 1 tokens per beam, and the drawn candidates are ranked by score."""
    expected, got = seeded_draws(tmp_path, num_beams=4, **kwargs)
    assert torch.equal(got, expected), (got, expected)


@pytest.mark.parametrize("kwargs", [{}, {"top_k": None}, {"top_k": 0}, {"num_beams": 3}])
def test_sampling_with_top_k_unset_draws_what_transformers_draws(tmp_path, kwargs):
    """transformers samples from the 50 most likely tokens when top_k is not given, from all
    of them with top_k None or 0; a flat distribution (temperature 20) shows the tail."""
    expected, got = seeded_draws(tmp_path, temperature=20.0, **kwargs)
    assert torch.equal(got, expected), (got, expected)


@pytest.mark.parametrize("name", sorted(SEQ2SEQ))
def test_seq2seq_prompt_with_pad_ids_and_no_mask_equals_hf(tmp_path, name):
    """transformers infers a mask from pad ids for decoder-only models only: an
    encoder-decoder's encoder sees the pad ids of a prompt given without attention_mask."""
    ref_model, ours = pair(tmp_path, name)
    ids, _ = prompts(True)
    ids[1, 5:] = ref_model.config.pad_token_id
    for kwargs in ({"max_new_tokens": 8}, {"max_new_tokens": 8, "num_beams": 3}):
        expected = ref_model.generate(ids, do_sample=False, **kwargs)
        assert torch.equal(ours.generate(ids, **kwargs), expected), kwargs


def test_cache_holds_only_kv_heads_and_is_allocated_once(tmp_path):
    _, ours = pair(tmp_path, "llama")
    cache = ours.new_cache(batch=2, capacity=30)
    assert cache.layers[0].k.shape == (2, 2, 30, 8)  # 2 KV heads of 4 query heads, head_dim 8
    ptr = cache.layers[0].k.data_ptr()
    ids = torch.randint(6, V, (2, 5))
    ours(ids, cache=cache)
    ours(ids[:, :1], cache=cache)
    assert cache.length == 6 and cache.layers[0].k.data_ptr() == ptr


def test_bad_generation_arguments_are_clear(tmp_path):
    _, ours = pair(tmp_path, "gpt2")
    ids = torch.randint(6, V, (1, 4))
    with pytest.raises(ValueError, match="max_new_tokens must be a positive integer"):
        ours.generate(ids, max_new_tokens=0)
    with pytest.raises(ValueError, match="top_p must be in"):
        ours.generate(ids, do_sample=True, top_p=1.5)
    encoder = archzoo.build_model(
        "bert-base", {"n_layers": 1, "d_model": 16, "n_heads": 2, "d_ff": 32, "vocab_size": 50}
    )
    with pytest.raises(ValueError, match="encoder-only model cannot generate"):
        encoder.generate(ids)


def mistral_pair(tmp_path, window: int = 4):
    model = hf.MistralForCausalLM(
        hf.MistralConfig(
            num_hidden_layers=2,
            hidden_size=32,
            num_attention_heads=4,
            num_key_value_heads=2,
            intermediate_size=64,
            vocab_size=V,
            max_position_embeddings=64,
            sliding_window=window,
            eos_token_id=5,
            pad_token_id=0,
        )
    )
    perturb(model, scale=0.2)
    model.eval()
    return model, archzoo.from_hf(save_hf(model, tmp_path / "mistral"))


def test_sliding_window_generation_equals_hf_with_a_window_sized_cache(tmp_path):
    ref, ours = mistral_pair(tmp_path, window=4)
    assert ours.spec.data["attention"]["kind"] == "local"
    ids, mask = prompts(False)  # 7-token prompts (one left-padded): longer than the window
    kwargs = {"max_new_tokens": 20, "min_new_tokens": 20}
    expected = ref.generate(ids, attention_mask=mask, do_sample=False, **kwargs)
    assert torch.equal(ours.generate(ids, attention_mask=mask, **kwargs), expected)
    assert torch.equal(ours.generate(ids, attention_mask=mask, use_cache=False, **kwargs), expected)
    beams = {"num_beams": 3, "max_new_tokens": 10}
    assert torch.equal(
        ours.generate(ids, attention_mask=mask, **beams),
        ours.generate(ids, attention_mask=mask, use_cache=False, **beams),
    )


def test_sliding_window_cache_never_holds_more_than_the_window(tmp_path):
    _, ours = mistral_pair(tmp_path, window=4)
    cache = ours.new_cache(batch=1, capacity=64)
    ids = torch.randint(6, V, (1, 9))
    ours(ids, cache=cache)
    for _ in range(30):
        ours(torch.randint(6, V, (1, 1)), cache=cache)
        for layer in cache.layers:
            assert layer.k.shape[2] == layer.v.shape[2] == 4
            stored = layer.index[layer.index >= 0]
            assert stored.numel() <= 4 and int(stored.min()) > cache.length - 1 - 4
