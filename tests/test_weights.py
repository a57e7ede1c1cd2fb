"""Weights I/O: plain safetensors, spec in the metadata, tied tensors once, no pickle, loud errors."""

from __future__ import annotations

import copy
import json
import os
import pickle
from pathlib import Path

import pytest
import torch
from conftest import tiny
from safetensors import safe_open
from safetensors.torch import save_file

import archzoo

TINY = tiny(vocab_size=100, without=("dropout",))
TINY_ENCODER_DECODER = {
    "name": "tiny-encoder-decoder",
    "family": "encoder-decoder",
    "vocab_size": 100,
    "d_model": 32,
    "n_layers": 2,
    "n_heads": 4,
    "d_ff": 64,
    "max_len": 64,
    "tie_embeddings": True,
    "embedding": {"kind": "token", "scale": True},
    "position": "sinusoidal",
    "attention": {"kind": "mha"},
    "block": "post_ln",
    "norm": "layernorm",
    "ffn": {"kind": "mlp", "activation": "relu"},
    "head": {"kind": "lm", "tie": True},
}


def tied_weights(model: archzoo.ZooModel) -> list[torch.nn.Parameter]:
    """The parameters that must stay one object: token table(s) and the output projection."""
    if model.family == "decoder":
        return [model.decoder.embedding.word.weight, model.head.proj.weight]
    if model.family == "encoder":
        return [model.encoder.embedding.word.weight, model.head.decoder.weight]
    return [
        model.encoder.embedding.word.weight,
        model.decoder.embedding.word.weight,
        model.head.proj.weight,
    ]


def build(kind: str) -> archzoo.ZooModel:
    torch.manual_seed(0)
    if kind == "decoder":
        model = archzoo.build_model("gpt2", TINY)
    elif kind == "encoder":
        model = archzoo.build_model("bert-base", TINY)
    else:
        model = archzoo.build_model(TINY_ENCODER_DECODER)
    with torch.no_grad():  # non-trivial biases and norm scales, so every tensor matters
        for p in model.parameters():
            p.add_(0.01 * torch.randn_like(p))
    return model.eval()


def forward(model: archzoo.ZooModel) -> torch.Tensor:
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 100, (2, 9), generator=gen)
    mask = torch.ones(2, 9, dtype=torch.long)
    mask[1, 6:] = 0
    with torch.no_grad():
        if model.family == "encoder-decoder":
            tgt = torch.randint(0, 100, (2, 5), generator=gen)
            return model(ids, attention_mask=mask, decoder_input_ids=tgt).logits
        return model(ids, attention_mask=mask).logits


def stored(path: Path) -> tuple[dict[str, str], dict[str, torch.Tensor]]:
    with safe_open(str(path), framework="pt") as f:
        return f.metadata(), {k: f.get_tensor(k) for k in f.keys()}


def nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


FAMILIES = ["decoder", "encoder", "encoder-decoder"]


@pytest.mark.parametrize("family", FAMILIES)
def test_save_then_load_gives_bit_identical_logits(family, tmp_path):
    model = build(family)
    path = tmp_path / "m.safetensors"
    archzoo.save(model, path)
    loaded = archzoo.load(path).eval()
    assert loaded.spec.data == model.spec.data
    expected, got = forward(model), forward(loaded)
    assert got.dtype == expected.dtype == torch.float32
    assert torch.equal(got, expected)
    for name, t in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], t), name


@pytest.mark.parametrize("family", FAMILIES)
def test_model_deep_copies_and_pickles_as_a_whole(family, tmp_path):
    """copy.deepcopy (EMA, a frozen teacher, AveragedModel) and torch.save(model): the copy
    owns its parameters and gives the same logits; the plugin registry is shared, not copied
    (its plugin manager holds modules, which neither deepcopy nor pickle can copy)."""
    model = build(family)
    twin = copy.deepcopy(model)
    assert twin.spec.plan.registry is model.spec.plan.registry
    for (name, p), q in zip(model.named_parameters(), twin.parameters(), strict=True):
        assert q is not p and torch.equal(q, p), name
    torch.save(model, tmp_path / "m.pt")
    loaded = torch.load(tmp_path / "m.pt", weights_only=False)
    assert torch.equal(forward(twin.eval()), forward(model.eval()))
    assert torch.equal(forward(loaded.eval()), forward(model))


@pytest.mark.parametrize("family", FAMILIES)
def test_file_is_plain_safetensors_with_spec_and_tied_tensors_once(family, tmp_path):
    model = build(family)
    path = tmp_path / "m.safetensors"
    archzoo.save(model, path)
    metadata, tensors = stored(path)
    assert json.loads(metadata["archzoo.spec"]) == model.spec.data
    assert archzoo.load_spec(json.loads(metadata["archzoo.spec"])).data == model.spec.data

    state = model.state_dict()
    names: dict[int, int] = {}  # every parameter object and how many names it has
    for _, p in model.named_parameters(remove_duplicate=False):
        names[id(p)] = names.get(id(p), 0) + 1
    n_tied = sum(n - 1 for n in names.values())
    assert n_tied >= len(tied_weights(model)) - 1
    assert len(tensors) == len(state) - n_tied < len(state)
    param_names = {n for n, _ in model.named_parameters(remove_duplicate=False)}
    unique_bytes = sum(nbytes(p) for p in model.parameters())  # tied counted once
    unique_bytes += sum(nbytes(t) for n, t in state.items() if n not in param_names)  # buffers
    stored_bytes = sum(nbytes(t) for t in tensors.values())
    assert stored_bytes == unique_bytes
    assert stored_bytes < sum(nbytes(t) for t in state.values())
    assert set(tensors) <= set(state)
    for name, t in tensors.items():
        assert torch.equal(t, state[name]), name


@pytest.mark.parametrize("family", FAMILIES)
def test_loaded_model_keeps_tied_parameters_as_one_object(family, tmp_path):
    path = tmp_path / "m.safetensors"
    archzoo.save(build(family), path)
    loaded = archzoo.load(path)
    first, *others = tied_weights(loaded)
    for other in others:
        assert other is first
    # an in-place update through one name is seen through every other
    with torch.no_grad():
        first.add_(1.0)
    assert all(torch.equal(other, first) for other in others)


def test_load_never_unpickles(tmp_path, monkeypatch):
    path = tmp_path / "m.safetensors"
    model = build("decoder")
    archzoo.save(model, path)

    def refuse(*args, **kwargs):
        raise AssertionError("archzoo.load used pickle")

    class RefusingUnpickler:
        def __init__(self, *args, **kwargs):
            refuse()

    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "loads", refuse)
    monkeypatch.setattr(pickle, "Unpickler", RefusingUnpickler)
    monkeypatch.setattr(torch, "load", refuse)
    loaded = archzoo.load(path).eval()
    assert torch.equal(forward(loaded), forward(model))


def test_truncated_file_is_a_weights_error(tmp_path):
    path = tmp_path / "m.safetensors"
    archzoo.save(build("decoder"), path)
    data = path.read_bytes()
    for cut in (len(data) - 1, len(data) // 2, 6):
        bad = tmp_path / f"cut{cut}.safetensors"
        bad.write_bytes(data[:cut])
        with pytest.raises(archzoo.WeightsError, match="not a readable safetensors file") as err:
            archzoo.load(bad)
        assert str(bad) in str(err.value)


def test_random_bytes_are_a_weights_error(tmp_path):
    path = tmp_path / "noise.safetensors"
    path.write_bytes(os.urandom(4096))
    with pytest.raises(archzoo.WeightsError, match="not a readable safetensors file"):
        archzoo.load(path)


def test_missing_file_is_a_weights_error(tmp_path):
    with pytest.raises(archzoo.WeightsError, match="no such file"):
        archzoo.load(tmp_path / "absent.safetensors")


def test_safetensors_without_spec_is_a_weights_error(tmp_path):
    path = tmp_path / "plain.safetensors"
    save_file({"w": torch.zeros(3)}, str(path), metadata={"format": "pt"})
    with pytest.raises(archzoo.WeightsError, match="no archzoo spec"):
        archzoo.load(path)


def rewrite_spec(src: Path, dst: Path, **changes: object) -> None:
    """Copy a saved file, editing keys of the spec in its metadata."""
    metadata, tensors = stored(src)
    spec = json.loads(metadata["archzoo.spec"])
    spec.update(changes)
    save_file(tensors, str(dst), metadata={**metadata, "archzoo.spec": json.dumps(spec)})


def test_tensors_that_do_not_fit_the_spec_are_named(tmp_path):
    path = tmp_path / "m.safetensors"
    archzoo.save(build("decoder"), path)

    more_layers = tmp_path / "more.safetensors"
    rewrite_spec(path, more_layers, n_layers=3)
    with pytest.raises(archzoo.WeightsError, match="do not fit the spec") as err:
        archzoo.load(more_layers)
    assert "missing tensors" in str(err.value)
    assert "decoder.blocks.2." in str(err.value)

    fewer_layers = tmp_path / "fewer.safetensors"
    rewrite_spec(path, fewer_layers, n_layers=1)
    with pytest.raises(archzoo.WeightsError, match="unexpected tensors") as err:
        archzoo.load(fewer_layers)
    assert "decoder.blocks.1." in str(err.value)

    wider = tmp_path / "wider.safetensors"
    rewrite_spec(path, wider, d_ff=96)
    with pytest.raises(archzoo.WeightsError, match="mis-shaped tensors") as err:
        archzoo.load(wider)
    assert "file (64, 32) vs model (96, 32)" in str(err.value)


def test_stored_spec_that_does_not_validate_is_a_weights_error(tmp_path):
    path = tmp_path / "m.safetensors"
    archzoo.save(build("decoder"), path)
    bad = tmp_path / "bad.safetensors"
    rewrite_spec(path, bad, n_heads=5)  # 32 is not divisible by 5
    with pytest.raises(archzoo.WeightsError, match="does not validate"):
        archzoo.load(bad)

    not_json = tmp_path / "notjson.safetensors"
    metadata, tensors = stored(path)
    save_file(tensors, str(not_json), metadata={**metadata, "archzoo.spec": "{not json"})
    with pytest.raises(archzoo.WeightsError, match="not valid JSON"):
        archzoo.load(not_json)


def test_saving_a_meta_model_is_a_weights_error(tmp_path):
    model = archzoo.build_model("gpt2", TINY, device="meta")
    path = tmp_path / "meta.safetensors"
    with pytest.raises(archzoo.WeightsError, match="meta device"):
        archzoo.save(model, path)
    assert not path.exists()


def test_load_keeps_the_saved_precision_unless_asked(tmp_path):
    overrides = {"n_layers": 1, "d_model": 16, "n_heads": 2, "d_ff": 32, "vocab_size": 50}
    model = archzoo.build_model("gpt2", overrides, dtype=torch.bfloat16)
    path = tmp_path / "bf16.safetensors"
    archzoo.save(model, path)
    again = archzoo.load(path)
    assert {p.dtype for p in again.parameters()} == {torch.bfloat16}
    assert again.head.proj.weight is again.decoder.embedding.word.weight
    assert {p.dtype for p in archzoo.load(path, dtype=torch.float32).parameters()} == {
        torch.float32
    }


def test_alias_metadata_that_is_not_a_mapping_is_a_weights_error(tmp_path):
    from safetensors.torch import load_file, save_file

    overrides = {"n_layers": 1, "d_model": 16, "n_heads": 2, "d_ff": 32, "vocab_size": 50}
    path = tmp_path / "m.safetensors"
    archzoo.save(archzoo.build_model("gpt2", overrides), path)
    with safe_open(str(path), framework="pt") as f:
        meta = dict(f.metadata())
    meta["archzoo.aliases"] = "[1, 2]"
    save_file(load_file(path), path, metadata=meta)
    with pytest.raises(archzoo.WeightsError, match="must map tensor names"):
        archzoo.load(path)
