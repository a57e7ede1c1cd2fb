"""Hostile tensors given to forward and generate: a ValueError naming the argument and the
offending value or shape, never an IndexError/RuntimeError from deep inside, never a silently
wrong result (an additive mask read as a keep mask, a segment id ignored, a batch broadcast).
"""

from __future__ import annotations

import copy

import pytest
import torch

import archzoo
from archzoo.parts.input_checks import InputChecks, trusted_inputs

SIZES = {"n_layers": 1, "d_model": 16, "n_heads": 2, "d_ff": 32, "vocab_size": 64, "max_len": 16}
MODELS = {
    "gpt2": ("gpt2", {}),  # decoder, learned positions, no segment embeddings
    "bert": ("bert-base", {}),  # encoder, two segment types
    "llama": (
        "llama3.2-1b",
        {"head_dim": 8, "attention.n_kv_heads": 1, "bos_token_id": 1, "eos_token_id": 2},
    ),  # rotary
    "t5": ("t5-small", {"head_dim": 8}),  # encoder-decoder
}


@pytest.fixture(scope="module")
def models() -> dict[str, archzoo.ZooModel]:
    out = {}
    for key, (name, extra) in MODELS.items():
        torch.manual_seed(0)
        out[key] = archzoo.build_model(name, {**SIZES, **extra, "dropout": 0.0}).eval()
    return out


def ids(b: int = 2, t: int = 5) -> torch.Tensor:
    return torch.randint(3, 64, (b, t), generator=torch.Generator().manual_seed(b * 100 + t))


def ones(b: int = 2, t: int = 5, dtype: torch.dtype = torch.long) -> torch.Tensor:
    return torch.ones(b, t, dtype=dtype)


ADDITIVE = torch.tensor([[0.0, 0, 0, -10000.0, -10000.0], [0, 0, 0, 0, 0]])
NEG_INF = torch.tensor([[0.0, 0, 0, float("-inf"), 0], [0, 0, 0, 0, 0]])

# id, model, forward kwargs, words of the ValueError
# fmt: off
FORWARD_CASES = [
    # additive float masks: refused, never inverted
    ("mask-additive-1e4", "gpt2", lambda: {"input_ids": ids(), "attention_mask": ADDITIVE}, ["attention_mask must hold only 1 (attend) and 0 (padding)", "got -10000.0", "(attention_mask == 0)"]),
    ("mask-additive-inf", "gpt2", lambda: {"input_ids": ids(), "attention_mask": NEG_INF}, ["attention_mask", "got -inf"]),
    ("mask-additive-bert", "bert", lambda: {"input_ids": ids(), "attention_mask": ADDITIVE}, ["attention_mask", "min -10000.0, max 0.0"]),
    ("mask-half", "gpt2", lambda: {"input_ids": ids(), "attention_mask": ones(dtype=torch.float) / 2}, ["attention_mask", "got 0.5"]),
    ("mask-nan", "llama", lambda: {"input_ids": ids(), "attention_mask": ones(dtype=torch.float).index_fill(1, torch.tensor([1]), float("nan"))}, ["attention_mask", "got nan"]),
    ("mask-int-2", "gpt2", lambda: {"input_ids": ids(), "attention_mask": ones() * 2}, ["attention_mask", "got 2"]),
    ("mask-int-minus-1", "bert", lambda: {"input_ids": ids(), "attention_mask": -ones()}, ["attention_mask", "got -1"]),
    ("mask-3d", "gpt2", lambda: {"input_ids": ids(), "attention_mask": ones()[:, None]}, ["attention_mask must be a 0/1 tensor of shape (batch, seq)", "(2, 1, 5)"]),
    ("mask-complex", "gpt2", lambda: {"input_ids": ids(), "attention_mask": ones(dtype=torch.complex64)}, ["attention_mask must be a 0/1 tensor", "complex64"]),
    ("mask-length", "bert", lambda: {"input_ids": ids(), "attention_mask": ones(2, 4)}, ["attention_mask must have shape (batch, 5)", "(2, 4)"]),
    # batch-size mismatches
    ("mask-batch-3", "gpt2", lambda: {"input_ids": ids(), "attention_mask": ones(3)}, ["attention_mask has batch size 3 but input_ids has 2"]),
    ("mask-batch-1", "bert", lambda: {"input_ids": ids(), "attention_mask": ones(1)}, ["attention_mask has batch size 1 but input_ids has 2"]),
    ("types-batch", "bert", lambda: {"input_ids": ids(), "token_type_ids": torch.zeros(3, 5, dtype=torch.long)}, ["token_type_ids must have the shape of input_ids (2, 5)", "(3, 5)"]),
    ("types-length", "bert", lambda: {"input_ids": ids(), "token_type_ids": torch.zeros(2, 4, dtype=torch.long)}, ["token_type_ids must have the shape of input_ids (2, 5)", "(2, 4)"]),
    ("positions-batch", "gpt2", lambda: {"input_ids": ids(), "position_ids": torch.zeros(3, 5, dtype=torch.long)}, ["position_ids must be an integer tensor of shape (2, 5) or (1, 5)", "(3, 5)"]),
    ("positions-1d", "llama", lambda: {"input_ids": ids(), "position_ids": torch.arange(5)}, ["position_ids must be an integer tensor of shape (2, 5) or (1, 5)", "(5,)"]),
    ("positions-float", "gpt2", lambda: {"input_ids": ids(), "position_ids": torch.zeros(2, 5)}, ["position_ids must be an integer tensor", "torch.float32"]),
    ("labels-batch", "gpt2", lambda: {"input_ids": ids(), "labels": torch.zeros(3, 5, dtype=torch.long)}, ["labels has batch size 3 but input_ids has 2"]),
    ("labels-length", "gpt2", lambda: {"input_ids": ids(), "labels": torch.zeros(2, 4, dtype=torch.long)}, ["labels of shape (2, 4) do not fit logits of shape (2, 5, 64)"]),
    ("labels-scalar", "gpt2", lambda: {"input_ids": ids(), "labels": torch.tensor(1)}, ["labels must be a tensor with a batch dimension"]),
    ("labels-past-vocab", "gpt2", lambda: {"input_ids": ids(), "labels": torch.full((2, 5), 64)}, ["labels hold class ids outside [0, 64) other than the ignored -100: 64"]),
    ("labels-negative", "llama", lambda: {"input_ids": ids(), "labels": torch.full((2, 5), -1)}, ["labels hold class ids outside [0, 64)", "-1"]),
    ("enc-dec-batch", "t5", lambda: {"input_ids": ids(2), "decoder_input_ids": ids(3)}, ["decoder_input_ids has batch size 3 but input_ids has 2"]),
    ("enc-dec-mask-batch", "t5", lambda: {"input_ids": ids(), "attention_mask": ones(3), "decoder_input_ids": ids()}, ["attention_mask has batch size 3 but input_ids has 2"]),
    ("enc-dec-decoder-mask", "t5", lambda: {"input_ids": ids(), "decoder_input_ids": ids(), "decoder_attention_mask": ADDITIVE}, ["decoder_attention_mask must hold only 1 (attend) and 0"]),
    ("enc-dec-encoder-outputs", "t5", lambda: {"decoder_input_ids": ids(), "encoder_outputs": torch.zeros(3, 5, 16)}, ["decoder_input_ids has batch size 2 but encoder_outputs has 3"]),
    ("enc-dec-labels", "t5", lambda: {"input_ids": ids(), "decoder_input_ids": ids(), "labels": torch.zeros(1, 5, dtype=torch.long)}, ["labels has batch size 1 but decoder_input_ids has 2"]),
    # token_type_ids given to a model without segment embeddings
    ("types-on-gpt2", "gpt2", lambda: {"input_ids": ids(), "token_type_ids": torch.zeros(2, 5, dtype=torch.long)}, ["token_type_ids were given", "no segment (token type) embeddings"]),
    ("types-on-llama", "llama", lambda: {"input_ids": ids(), "token_type_ids": torch.ones(2, 5, dtype=torch.long)}, ["token_type_ids were given"]),
    ("types-on-t5", "t5", lambda: {"input_ids": ids(), "decoder_input_ids": ids(), "token_type_ids": torch.zeros(2, 5, dtype=torch.long)}, ["token_type_ids were given"]),
    # batch size 0 and empty sequences
    ("batch-0", "gpt2", lambda: {"input_ids": torch.zeros(0, 5, dtype=torch.long)}, ["input_ids has batch size 0 (shape (0, 5))"]),
    ("batch-0-encoder", "bert", lambda: {"input_ids": torch.zeros(0, 3, dtype=torch.long)}, ["input_ids has batch size 0"]),
    ("batch-0-decoder", "t5", lambda: {"input_ids": ids(), "decoder_input_ids": torch.zeros(0, 1, dtype=torch.long)}, ["decoder_input_ids has batch size 0"]),
    ("length-0", "llama", lambda: {"input_ids": torch.zeros(2, 0, dtype=torch.long)}, ["input_ids is empty (sequence length 0)"]),
    ("ids-1d", "gpt2", lambda: {"input_ids": torch.arange(5)}, ["input_ids must be an integer tensor of shape (batch, seq)", "(5,)"]),
    ("ids-float", "bert", lambda: {"input_ids": ids().float()}, ["input_ids must be an integer tensor", "torch.float32"]),
    ("ids-missing", "gpt2", lambda: {}, ["input_ids is required"]),
    ("decoder-ids-missing", "t5", lambda: {"input_ids": ids()}, ["needs decoder_input_ids"]),
    # out-of-range segment, position and token ids
    ("types-past-2", "bert", lambda: {"input_ids": ids(), "token_type_ids": torch.full((2, 5), 2)}, ["token_type_ids holds segment ids outside [0, 2): min 2, max 2"]),
    ("types-negative", "bert", lambda: {"input_ids": ids(), "token_type_ids": torch.full((2, 5), -1)}, ["token_type_ids holds segment ids outside [0, 2): min -1"]),
    ("types-float", "bert", lambda: {"input_ids": ids(), "token_type_ids": torch.zeros(2, 5)}, ["token_type_ids must be an integer tensor", "torch.float32"]),
    ("positions-max-len", "gpt2", lambda: {"input_ids": ids(), "position_ids": torch.arange(12, 17)[None]}, ["position_ids holds positions outside [0, 16): min 12, max 16"]),
    ("positions-negative", "gpt2", lambda: {"input_ids": ids(), "position_ids": torch.arange(-1, 4)[None]}, ["position_ids holds positions outside [0, 16): min -1, max 3"]),
    ("positions-negative-rotary", "llama", lambda: {"input_ids": ids(), "position_ids": torch.full((2, 5), -3)}, ["position_ids holds positions outside >= 0: min -3"]),
    ("positions-negative-t5", "t5", lambda: {"input_ids": ids(), "decoder_input_ids": ids(), "position_ids": torch.full((2, 5), -1)}, ["position_ids holds positions outside >= 0"]),
    ("ids-past-vocab", "gpt2", lambda: {"input_ids": torch.full((2, 5), 64)}, ["input_ids holds ids outside [0, 64): min 64, max 64"]),
    ("ids-negative", "bert", lambda: {"input_ids": torch.full((2, 5), -5)}, ["input_ids holds ids outside [0, 64): min -5"]),
    ("ids-int32-past-vocab", "llama", lambda: {"input_ids": torch.full((1, 2), 10**6, dtype=torch.int32)}, ["input_ids holds ids outside [0, 64): min 1000000"]),
    ("decoder-ids-past-vocab", "t5", lambda: {"input_ids": ids(), "decoder_input_ids": torch.full((2, 1), 99)}, ["decoder_input_ids holds ids outside [0, 64): min 99"]),
    ("encoder-ids-past-vocab", "t5", lambda: {"input_ids": torch.full((2, 5), 64), "decoder_input_ids": ids()}, ["input_ids holds ids outside [0, 64)"]),
]
# fmt: on


@pytest.mark.parametrize(
    "model, make, words", [c[1:] for c in FORWARD_CASES], ids=[c[0] for c in FORWARD_CASES]
)
def test_hostile_forward_input_is_a_value_error_naming_it(model, make, words, models):
    with pytest.raises(ValueError) as err:
        models[model](**make())
    for word in words:
        assert word in str(err.value), (word, str(err.value))


GENERATE_CASES = [
    ("gpt2", {"input_ids": ids(), "attention_mask": ADDITIVE}, ["attention_mask", "got -10000.0"]),
    ("llama", {"input_ids": ids(), "attention_mask": ones(3)}, ["attention_mask has batch size 3"]),
    ("llama", {"input_ids": ids(), "attention_mask": ones(2, 4)}, ["shape of input_ids (2, 5)"]),
    ("gpt2", {"input_ids": torch.zeros(0, 4, dtype=torch.long)}, ["input_ids has batch size 0"]),
    ("t5", {"input_ids": torch.zeros(0, 4, dtype=torch.long)}, ["input_ids has batch size 0"]),
    ("t5", {"input_ids": ids(), "attention_mask": NEG_INF}, ["attention_mask", "got -inf"]),
    ("gpt2", {"input_ids": torch.full((1, 3), 70)}, ["input_ids holds ids outside [0, 64)"]),
    ("llama", {"input_ids": ids().float()}, ["input_ids must be an integer tensor"]),
    ("gpt2", {"input_ids": ids(), "max_new_tokens": 12}, ["needs 17 positions", "max_len 16"]),
    (
        "t5",
        {"input_ids": ids(), "max_new_tokens": 2.5},
        ["max_new_tokens must be a positive integer"],
    ),
]


@pytest.mark.parametrize("model, kwargs, words", GENERATE_CASES)
def test_hostile_generate_input_is_refused_before_decoding(model, kwargs, words, models):
    calls = []
    with pytest.raises(ValueError) as err:
        models[model].generate(**kwargs, on_token=calls.append)
    assert calls == []  # nothing was decoded
    for word in words:
        assert word in str(err.value), (word, str(err.value))


def test_generation_up_to_max_len_still_runs(models):
    out = models["gpt2"].generate(ids(), max_new_tokens=11, do_sample=False)
    assert out.shape == (2, 16)
    padded = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])  # left padding: 3 real tokens
    out = models["gpt2"].generate(ids(), attention_mask=padded, max_new_tokens=11)
    assert out.shape == (2, 16)


def test_rotary_positions_past_max_len_are_allowed(models):
    """Rotary has no table: positions past max_len run (rope scaling relies on it)."""
    out = models["llama"](ids(), position_ids=torch.arange(100, 105)[None])
    assert out.logits.shape == (2, 5, 64)


@pytest.mark.parametrize("model", ["gpt2", "bert", "llama"])
def test_zero_one_masks_of_every_dtype_agree(model, models):
    """The accepted conventions are one: bool, integer and float 0/1 masks give one output."""
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    with torch.no_grad():
        outs = [
            models[model](ids(), attention_mask=mask.to(dtype)).last_hidden_state
            for dtype in (torch.bool, torch.long, torch.int32, torch.float32, torch.bfloat16)
        ]
    for out in outs[1:]:
        assert torch.equal(out, outs[0])


def test_broadcast_positions_equal_the_expanded_ones(models):
    pos = torch.arange(2, 7)[None]
    with torch.no_grad():
        a = models["gpt2"](ids(), position_ids=pos).logits
        b = models["gpt2"](ids(), position_ids=pos.expand(2, 5)).logits
    assert torch.equal(a, b)


def test_value_checks_read_the_values_once(monkeypatch):
    """One device read for every range check of a forward (one sync on an accelerator)."""
    reads = []
    real = torch.Tensor.__bool__
    monkeypatch.setattr(torch.Tensor, "__bool__", lambda t: reads.append(t.shape) or real(t))
    checks = InputChecks()
    B, T = checks.ids(ids(), "input_ids", 64)
    checks.keep_mask(ones(dtype=torch.float), "attention_mask", B, "input_ids")
    checks.segments(torch.zeros(2, 5, dtype=torch.long), (B, T), 2)
    checks.positions(torch.arange(5)[None], (B, T), 16, "position_ids")
    checks.run()
    assert reads == [torch.Size([])]


def test_value_checks_are_skipped_for_meta_trusted_and_compiled_inputs(monkeypatch):
    bad = torch.full((2, 5), 999)
    for make in (lambda: bad.to("meta"), lambda: bad):
        checks = InputChecks()
        checks.ids(make(), "input_ids", 64)
        if make().device.type == "meta":
            checks.run()  # nothing to read on meta
            continue
        with trusted_inputs():
            checks.run()
        monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
        checks.run()
        monkeypatch.undo()
        with pytest.raises(ValueError, match="input_ids holds ids outside"):
            checks.run()


# generate's keyword arguments through the Python API: NaN/inf, wrong types, ids past the vocab
# fmt: off
ARGUMENT_CASES = [
    ({"do_sample": True, "temperature": float("nan")}, "temperature must be a finite number > 0, got nan"),
    ({"do_sample": True, "temperature": float("inf")}, "temperature must be a finite number > 0, got inf"),
    ({"temperature": "hot"}, "temperature must be a finite number > 0, got 'hot'"),
    ({"temperature": 0}, "temperature must be a finite number > 0, got 0"),
    ({"top_p": float("nan")}, "top_p must be in (0, 1], got nan"),
    ({"top_k": 1.5}, "top_k must be an integer >= 0, got 1.5"),
    ({"top_k": True}, "top_k must be an integer >= 0, got True"),
    ({"max_new_tokens": True}, "max_new_tokens must be a positive integer, got True"),
    ({"max_new_tokens": "5"}, "max_new_tokens must be a positive integer, got '5'"),
    ({"min_new_tokens": "1"}, "min_new_tokens must be an integer in [0, max_new_tokens=3], got '1'"),
    ({"min_new_tokens": 1.5}, "min_new_tokens must be an integer in [0, max_new_tokens=3], got 1.5"),
    ({"min_new_tokens": 4}, "min_new_tokens must be an integer in [0, max_new_tokens=3], got 4"),
    ({"num_beams": 2.0}, "num_beams must be an integer >= 1, got 2.0"),
    ({"num_beams": True}, "num_beams must be an integer >= 1, got True"),
    ({"num_beams": 2, "length_penalty": float("nan")}, "length_penalty must be a finite number, got nan"),
    ({"num_beams": 2, "early_stopping": "sometimes"}, "early_stopping must be True, False or 'never', got 'sometimes'"),
    ({"do_sample": "yes"}, "do_sample must be True or False, got 'yes'"),
    ({"use_cache": "no"}, "use_cache must be True or False, got 'no'"),
    ({"eos_token_id": 999}, "eos_token_id must be a token id in [0, 64), got 999"),
    ({"eos_token_id": -3}, "eos_token_id must be a token id in [0, 64), got -3"),
    ({"eos_token_id": [1, 999]}, "eos_token_id must be a token id in [0, 64), got 999"),
    ({"eos_token_id": "a"}, "eos_token_id must be a token id in [0, 64), got 'a'"),
    ({"pad_token_id": 999, "eos_token_id": 1}, "pad_token_id must be a token id in [0, 64), got 999"),
    ({"pad_token_id": -1}, "pad_token_id must be a token id in [0, 64), got -1"),
    ({"forced_eos_token_id": 64}, "forced_eos_token_id must be a token id in [0, 64), got 64"),
    ({"decoder_start_token_id": 99}, "decoder_start_token_id must be a token id in [0, 64), got 99"),
    ({"do_sample": True, "generator": "seed"}, "generator must be a torch.Generator, got str"),
    ({"on_token": 5}, "on_token must be callable, got int"),
    ({"on_token": print, "num_beams": 2}, "on_token cannot be used with beam search (num_beams=2)"),
]
# fmt: on


@pytest.mark.parametrize("kwargs, words", ARGUMENT_CASES)
def test_hostile_generate_argument_is_a_value_error_naming_it(kwargs, words, models):
    kwargs = {"max_new_tokens": 3, **kwargs}
    with pytest.raises(ValueError) as err:
        models["gpt2"].generate(ids(), **kwargs)
    assert words in str(err.value)


# new_cache's sizes: refused by name, never a negative-dimension or allocator error
# fmt: off
NEW_CACHE_CASES = [
    ((-1, 10), "new_cache: batch must be an integer >= 1, got -1"),
    ((0, 10), "new_cache: batch must be an integer >= 1, got 0"),
    ((2.5, 10), "new_cache: batch must be an integer >= 1, got 2.5"),
    ((2, -5), "new_cache: capacity must be an integer >= 1, got -5"),
    ((2, "8"), "new_cache: capacity must be an integer >= 1, got '8'"),
    ((2, 10**15), "a KV cache of 2 rows by 1000000000000000 tokens needs about"),
]
# fmt: on


@pytest.mark.parametrize("args, words", NEW_CACHE_CASES)
def test_hostile_new_cache_size_is_a_value_error_naming_it(args, words, models):
    with pytest.raises(ValueError) as err:
        models["gpt2"].new_cache(*args)
    assert words in str(err.value)


# a cache given to forward that does not fit the call: refused before anything is written
# fmt: off
FORWARD_CACHE_CASES = [
    ("batch-3", "gpt2", "gpt2", 2, lambda: {"input_ids": ids(3)}, ["cache was made for batch size 2 but input_ids has batch size 3", "new_cache(3, capacity)"]),
    ("batch-1", "llama", "llama", 2, lambda: {"input_ids": ids(1)}, ["cache was made for batch size 2 but input_ids has batch size 1"]),
    ("enc-dec-batch", "t5", "t5", 2, lambda: {"input_ids": ids(1), "decoder_input_ids": ids(1)}, ["but decoder_input_ids has batch size 1"]),
    ("another-model", "gpt2", "t5", 2, lambda: {"input_ids": ids()}, ["cache was made by another model"]),
    ("encoder", "bert", "gpt2", 2, lambda: {"input_ids": ids()}, ["a encoder model does not decode; cache must be None"]),
]
# fmt: on


@pytest.mark.parametrize(
    "model, owner, batch, make, words",
    [c[1:] for c in FORWARD_CACHE_CASES],
    ids=[c[0] for c in FORWARD_CACHE_CASES],
)
def test_hostile_cache_given_to_forward_is_a_value_error_naming_it(
    model, owner, batch, make, words, models
):
    cache = models[owner].new_cache(batch, 16)
    with pytest.raises(ValueError) as err:
        models[model](**make(), cache=cache)
    for word in words:
        assert word in str(err.value)
    assert cache.length == 0 and all(layer.length == 0 for layer in cache.layers)


def test_cache_that_is_not_one_or_of_another_dtype_is_refused(models):
    with pytest.raises(TypeError, match="cache must be a KVCache from model.new_cache"):
        models["gpt2"](ids(), cache={})
    cache = models["gpt2"].new_cache(2, 16)  # float32
    bf16 = copy.deepcopy(models["gpt2"]).to(torch.bfloat16)
    with pytest.raises(
        ValueError,
        match="cache holds torch.float32 on cpu but the model's weights are torch.bfloat16",
    ):
        bf16(ids(), cache=cache)


def test_a_refused_position_leaves_the_cache_as_it_was(models):
    """Positions past a learned table's max_len (16) are refused before the cache advances:
    the next token still decodes as the full sequence scores it."""
    model = models["gpt2"]
    cache = model.new_cache(2, 32)
    chunks = [ids(2, 5) for _ in range(3)]
    for chunk in chunks:
        model(chunk, cache=cache)
    with pytest.raises(ValueError, match="position 19 is beyond max_len 16"):
        model(ids(2, 5), cache=cache)
    assert cache.length == 15 and [layer.length for layer in cache.layers] == [15]
    last = ids(2, 1)
    full = torch.cat([*chunks, last], dim=1)
    got = model(last, cache=cache).logits[:, -1]
    assert torch.allclose(got, model(full).logits[:, -1], atol=1e-5)


def test_logits_to_keep_as_a_tensor_keeps_the_positions_it_lists(models):
    """transformers' meaning of a 1-D tensor (positions), never `-tensor:` (tensor([0]) kept
    every position); a 0-d tensor, a float or a position past the sequence is refused."""
    model, x = models["llama"], ids()
    full = model(x).logits  # (2, 5, 64)
    got = model(x, logits_to_keep=torch.tensor([0, 3])).logits
    assert torch.allclose(got, full[:, [0, 3]], atol=1e-6)  # the head's matmul is smaller
    assert torch.allclose(model(x, logits_to_keep=torch.tensor([0])).logits, full[:, :1], atol=1e-6)
    assert torch.allclose(model(x, logits_to_keep=2).logits, full[:, -2:], atol=1e-6)
    for bad, words in [
        (torch.tensor(2), "1-D integer tensor of positions, got torch.int64 of shape ()"),
        (1.5, "must be an int or a 1-D integer tensor of positions, got float"),
        (torch.tensor([5]), "logits_to_keep holds positions outside [-5, 5): [5]"),
    ]:
        with pytest.raises(ValueError) as err:
            model(x, logits_to_keep=bad)
        assert words in str(err.value)


def test_cache_made_under_inference_mode_is_refused_outside_it(models):
    """Its buffers are inference tensors: writing them outside inference_mode was a
    RuntimeError from the first in-place copy; inside inference_mode it decodes."""
    model = models["llama"]
    with torch.inference_mode():
        cache = model.new_cache(2, 16)
    with pytest.raises(ValueError, match=r"cache was made under torch.inference_mode\(\)"):
        model(ids(), cache=cache)
    assert cache.length == 0
    with torch.inference_mode():
        got = model(ids(), cache=cache).logits
    assert torch.allclose(got, model(ids()).logits, atol=1e-5)
