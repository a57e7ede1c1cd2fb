"""Hostile input, round 3, category 8: Python API arguments.

`device=` and `dtype=` of build_model, load and from_hf are checked before any work, and a
bad one is a ValueError naming the argument (torch's dtype names are accepted as strings,
complex and integer dtypes refused). Sparse or meta `input_ids`, or ids on another device
than the weights, are refused by forward and generate naming `input_ids`. Sampling
temperatures and beam length penalties that would overflow float32 are refused naming them.
"""

from __future__ import annotations

import pytest
import torch

import archzoo

TINY = {"n_layers": 1, "d_model": 16, "n_heads": 2, "d_ff": 32, "vocab_size": 64, "max_len": 32}
NAMES = "expected float32, float16, bfloat16 or float64"


@pytest.fixture(scope="module")
def model() -> archzoo.ZooModel:
    torch.manual_seed(0)
    return archzoo.build_model("gpt2", TINY).eval()


def refused(call, *words: str) -> str:
    with pytest.raises(ValueError) as err:
        call()
    msg = str(err.value)
    for word in words:
        assert word in msg, (word, msg)
    return msg


# ---------------------------------------------------------------- dtype=


@pytest.mark.parametrize(
    "name, dtype",
    [
        ("float16", torch.float16),
        ("torch.bfloat16", torch.bfloat16),
        ("half", torch.float16),
        ("float64", torch.float64),
    ],
)
def test_dtype_by_name_builds_what_the_dtype_builds(name, dtype):
    torch.manual_seed(1)
    by_name = archzoo.build_model("gpt2", TINY, dtype=name)
    torch.manual_seed(1)
    by_dtype = archzoo.build_model("gpt2", TINY, dtype=dtype)
    assert {p.dtype for p in by_name.parameters()} == {dtype}
    for (n, a), (_, b) in zip(
        by_name.state_dict().items(), by_dtype.state_dict().items(), strict=True
    ):
        assert torch.equal(a, b), n


@pytest.mark.parametrize(
    "dtype, words",
    [
        ("floaty", ["dtype='floaty' is not a torch dtype name", NAMES]),
        ("Tensor", ["dtype='Tensor' is not a torch dtype name"]),
        ("__class__", ["dtype='__class__' is not a torch dtype name"]),
        ("float 16", ["dtype='float 16' is not a torch dtype name"]),
        (torch.complex64, ["dtype=torch.complex64 is not a floating-point dtype", NAMES]),
        ("complex128", ["dtype=torch.complex128 is not a floating-point dtype"]),
        (torch.int64, ["dtype=torch.int64 is not a floating-point dtype"]),
        (torch.bool, ["dtype=torch.bool is not a floating-point dtype"]),
        (torch.float8_e4m3fn, ["dtype=torch.float8_e4m3fn is not a floating-point dtype"]),
        (16, ["dtype must be a torch.dtype or its name", "got int"]),
        (float, ["dtype must be a torch.dtype or its name", "got type"]),
    ],
)
def test_bad_dtype_is_refused_at_once_naming_the_argument(dtype, words):
    refused(lambda: archzoo.build_model("gpt2", TINY, dtype=dtype), *words)


def test_load_and_from_hf_check_dtype_and_device_before_reading(tmp_path):
    missing = tmp_path / "none.safetensors"  # the argument is named before the file is read
    refused(lambda: archzoo.load(missing, dtype="floaty"), "dtype='floaty'")
    refused(lambda: archzoo.load(missing, device="nope"), "device='nope' is not a device")
    refused(lambda: archzoo.from_hf(tmp_path, dtype=torch.complex64), "dtype=torch.complex64")
    refused(lambda: archzoo.from_hf(tmp_path, device="nope"), "device='nope'")
    assert list(tmp_path.iterdir()) == []


def test_load_takes_a_dtype_name(model, tmp_path):
    path = tmp_path / "m.safetensors"
    archzoo.save(model, path)
    before = path.read_bytes()
    loaded = archzoo.load(path, dtype="bfloat16")
    assert {p.dtype for p in loaded.parameters()} == {torch.bfloat16}
    for name, p in model.named_parameters():
        assert torch.equal(p.detach().to(torch.bfloat16), loaded.get_parameter(name)), name
    assert path.read_bytes() == before


# ---------------------------------------------------------------- device=


@pytest.mark.parametrize(
    "device, words",
    [
        ("nope", ["device='nope' is not a device", "'cpu', 'cuda', 'cuda:N'"]),
        ("cpu:x", ["device='cpu:x' is not a device"]),
        ("float16", ["device='float16' is not a device"]),
        (-1, ["device=-1 is not a device"]),
        ("cuda:9", ["device='cuda:9'"]),  # none here, or fewer than ten
        (1.5, ["device must be a torch.device, its name or an index", "got float"]),
        (True, ["device must be a torch.device", "got bool"]),
    ],
)
def test_bad_device_is_refused_at_once_naming_the_argument(device, words):
    refused(lambda: archzoo.build_model("gpt2", TINY, device=device), *words)


# ---------------------------------------------------------------- input_ids


IDS = torch.tensor([[1, 2, 3, 4]])


@pytest.mark.parametrize(
    "ids, words",
    [
        (IDS.to_sparse(), ["input_ids must be a dense tensor, got a sparse_coo one"]),
        (IDS.to("meta"), ["input_ids is a meta tensor", "weights are on cpu"]),
    ],
    ids=["sparse", "meta"],
)
def test_forward_and_generate_refuse_ids_without_dense_values(model, ids, words):
    refused(lambda: model(ids), *words)
    refused(lambda: model.generate(ids, max_new_tokens=2), *words)


MASK = torch.ones(1, 4, dtype=torch.long)


@pytest.mark.parametrize(
    "inputs, words",
    [
        ({"attention_mask": MASK.to_sparse()}, ["attention_mask must be a dense tensor"]),
        ({"attention_mask": MASK.to("meta")}, ["attention_mask is a meta tensor"]),
        ({"position_ids": torch.arange(4)[None].to_sparse()}, ["position_ids must be a dense"]),
        ({"position_ids": torch.arange(4)[None].to("meta")}, ["position_ids is a meta tensor"]),
    ],
    ids=["mask-sparse", "mask-meta", "positions-sparse", "positions-meta"],
)
def test_forward_refuses_other_inputs_without_dense_values(model, inputs, words):
    refused(lambda: model(IDS, **inputs), *words)
    if "attention_mask" in inputs:
        refused(lambda: model.generate(IDS, max_new_tokens=2, **inputs), *words)


def test_meta_ids_still_run_a_meta_model():
    """Shape-only runs (cost and memory estimates) keep working: model and ids on meta."""
    meta = archzoo.build_model("gpt2", TINY, device="meta")
    with torch.no_grad():
        out = meta(IDS.to("meta"))
    assert out.logits.shape == (1, 4, 64) and out.logits.device.type == "meta"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_ids_on_another_device_than_the_weights_are_refused(model):
    gpu = archzoo.build_model("gpt2", TINY, device="cuda")
    refused(lambda: gpu(IDS), "input_ids is on cpu but the model's weights are on cuda:0")
    refused(lambda: model(IDS.cuda()), "input_ids is on cuda:0 but the model's weights are on cpu")
    assert gpu(IDS.cuda()).logits.shape == (1, 4, 64)


# ---------------------------------------------------------------- generate's numbers


@pytest.mark.parametrize("temperature", [1e-300, 1e-40, 1e-6])
def test_sampling_temperature_that_overflows_is_refused(model, temperature):
    refused(
        lambda: model.generate(IDS, max_new_tokens=2, do_sample=True, temperature=temperature),
        f"temperature={temperature!r} is below 1e-05 with do_sample=True",
        "use do_sample=False",
    )


def test_tiny_temperature_is_ignored_without_sampling_and_the_floor_samples(model):
    greedy = model.generate(IDS, max_new_tokens=3)
    assert torch.equal(model.generate(IDS, max_new_tokens=3, temperature=1e-300), greedy)
    # at the floor, sampling is greedy for these logits (gaps far above 1e-5 * log(64))
    g = torch.Generator().manual_seed(0)
    sampled = model.generate(
        IDS, max_new_tokens=3, do_sample=True, temperature=1e-5, top_k=None, generator=g
    )
    assert torch.equal(sampled, greedy)


@pytest.mark.parametrize("penalty", [1e308, -1e308, 80.0, -80.0])
def test_beam_length_penalty_that_overflows_is_refused(model, penalty):
    refused(
        lambda: model.generate(IDS, max_new_tokens=3, num_beams=3, length_penalty=penalty),
        f"length_penalty={penalty!r} is out of range for max_new_tokens=3",
        "|length_penalty| <= 79.19",
    )


def test_length_penalty_inside_the_bound_runs_and_one_token_takes_any(model):
    out = model.generate(IDS, max_new_tokens=3, num_beams=3, length_penalty=79.0)
    assert out.shape == (1, 7)
    one = model.generate(IDS, max_new_tokens=1, num_beams=3, length_penalty=1e308)
    assert torch.equal(one, model.generate(IDS, max_new_tokens=1, num_beams=3))
