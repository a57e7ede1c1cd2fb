"""Devices and dtypes: meta builds allocate nothing, bf16/fp16 run clean, nothing assumes CUDA."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
import torch
from conftest import tiny

import archzoo

ROOT = Path(__file__).resolve().parents[1]
TINY = tiny(vocab_size=100)
GPT2_XL = {"n_layers": 48, "d_model": 1600, "n_heads": 25, "d_ff": 6400}


def xl_spec() -> tuple[str, dict]:
    if "gpt2-xl" in archzoo.list_models():
        return "gpt2-xl", {}
    return "gpt2", GPT2_XL


def gpt2_params(V: int, P: int, L: int, d: int, ff: int) -> int:
    """GPT-2 parameter count with a tied head: tables, L blocks (attn + mlp + 2 LN), final LN."""
    attention = 3 * d * d + 3 * d + d * d + d
    mlp = d * ff + ff + ff * d + d
    return V * d + P * d + L * (attention + mlp + 4 * d) + 2 * d


def logits_of(model: archzoo.ZooModel, ids: torch.Tensor, mask: torch.Tensor | None = None):
    with torch.no_grad():
        return model(ids, attention_mask=mask).logits


def assert_close_in_bf16(got: torch.Tensor, expected: torch.Tensor) -> None:
    """Loose bf16 check: error within a few % of the logits' scale (bf16 keeps ~3 digits)."""
    got, expected = got.float().cpu(), expected.float().cpu()
    scale = expected.abs().max().item()
    err = (got - expected).abs().max().item()
    assert err <= 0.03 * scale + 1e-3, f"max error {err:.4g} vs logit scale {scale:.4g}"
    # and the model ranks tokens the same way almost everywhere
    agree = (got.argmax(-1) == expected.argmax(-1)).float().mean().item()
    assert agree >= 0.9, agree


# (a) a 1.5B-parameter model on the meta device


def test_gpt2_xl_sized_model_builds_on_meta_quickly_without_memory():
    name, overrides = xl_spec()
    archzoo.build_model("gpt2", TINY, device="meta")  # registry and plugins loaded already
    start = time.perf_counter()
    model = archzoo.build_model(name, overrides, device="meta")
    elapsed = time.perf_counter() - start
    assert elapsed < 10.0, f"meta build of a 1.5B model took {elapsed:.2f}s"
    params = list(model.parameters())
    assert params and all(p.is_meta for p in params)
    assert all(b.is_meta for b in model.buffers())
    d = model.spec.data
    expected = gpt2_params(d["vocab_size"], d["max_len"], d["n_layers"], d["d_model"], d["d_ff"])
    assert model.num_parameters() == expected == 1_557_611_200  # HF's gpt2-xl count
    assert model.summary()["params"] == expected


# (b) bf16 parameters and forward


@pytest.mark.parametrize("name", ["gpt2", "bert-base"])
def test_bf16_build_runs_in_bf16_and_tracks_fp32(name):
    torch.manual_seed(0)
    fp32 = archzoo.build_model(name, TINY).eval()
    bf16 = archzoo.build_model(name, TINY, dtype=torch.bfloat16).eval()
    assert {p.dtype for p in bf16.parameters()} == {torch.bfloat16}
    bf16.load_state_dict(fp32.state_dict())  # same weights, rounded to bf16
    ids = torch.randint(0, 100, (2, 12), generator=torch.Generator().manual_seed(1))
    expected, got = logits_of(fp32, ids), logits_of(bf16, ids)
    assert got.dtype == torch.bfloat16
    assert bf16(ids).last_hidden_state.dtype == torch.bfloat16
    assert torch.isfinite(got).all()
    assert_close_in_bf16(got, expected)


def test_bf16_build_keeps_tied_weights_tied():
    model = archzoo.build_model("gpt2", TINY, dtype=torch.bfloat16)
    assert model.head.proj.weight is model.decoder.embedding.word.weight


# (c) masks in half precision


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("position", ["learned", "alibi"])  # bool mask, and mask + score bias
def test_padded_half_precision_batch_is_finite(dtype, position):
    torch.manual_seed(0)
    fp32 = archzoo.build_model("gpt2", {**TINY, "position": position}).eval()
    half = archzoo.build_model("gpt2", {**TINY, "position": position}, dtype=dtype).eval()
    half.load_state_dict(fp32.state_dict())
    ids = torch.randint(0, 100, (3, 10), generator=torch.Generator().manual_seed(2))
    mask = torch.ones(3, 10, dtype=torch.long)
    mask[0, :4] = 0  # left padding: with the causal mask, queries 0..3 see no key at all
    mask[1, 7:] = 0  # right padding
    got = logits_of(half, ids, mask)
    assert got.dtype == dtype
    assert torch.isfinite(got).all()
    real = mask.bool()
    assert_close_in_bf16(got[real], logits_of(fp32, ids, mask)[real])


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_padded_half_precision_encoder_is_finite(dtype):
    model = archzoo.build_model("bert-base", TINY, dtype=dtype).eval()
    ids = torch.randint(0, 100, (2, 8), generator=torch.Generator().manual_seed(3))
    mask = torch.tensor([[1] * 8, [1] * 3 + [0] * 5])
    got = logits_of(model, ids, mask)
    assert got.dtype == dtype
    assert torch.isfinite(got).all()


# (d) CUDA, where there is one


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_bf16_model_matches_cpu():
    torch.manual_seed(0)
    cpu = archzoo.build_model("gpt2", TINY).eval()
    gpu = archzoo.build_model("gpt2", TINY, device="cuda", dtype=torch.bfloat16).eval()
    assert {p.device.type for p in gpu.parameters()} == {"cuda"}
    assert {p.dtype for p in gpu.parameters()} == {torch.bfloat16}
    assert gpu.head.proj.weight is gpu.decoder.embedding.word.weight
    gpu.load_state_dict(cpu.state_dict())
    ids = torch.randint(0, 100, (3, 16), generator=torch.Generator().manual_seed(1))
    mask = torch.ones(3, 16, dtype=torch.long)
    mask[0, :5] = 0
    mask[2, 11:] = 0
    expected = logits_of(cpu, ids, mask)
    got = logits_of(gpu, ids.cuda(), mask.cuda())
    assert got.device.type == "cuda" and got.dtype == torch.bfloat16
    assert torch.isfinite(got).all()
    real = mask.bool()
    assert_close_in_bf16(got.cpu()[real], expected[real])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_save_and_load_round_trip(tmp_path):
    torch.manual_seed(0)
    model = archzoo.build_model("gpt2", TINY, device="cuda").eval()
    path = tmp_path / "m.safetensors"
    archzoo.save(model, path)
    loaded = archzoo.load(path, device="cuda").eval()
    assert {p.device.type for p in loaded.parameters()} == {"cuda"}
    assert loaded.head.proj.weight is loaded.decoder.embedding.word.weight
    ids = torch.randint(0, 100, (2, 9), device="cuda")
    assert torch.equal(logits_of(loaded, ids), logits_of(model, ids))


# (e) nothing in the library assumes CUDA

CUDA_ASSUMPTIONS = [
    re.compile(r"\.cuda\("),
    re.compile(r"""device\s*=\s*["']cuda"""),
    re.compile(r"""torch\.device\(\s*["']cuda"""),
    re.compile(r"""\.to\(\s*["']cuda"""),
]


def test_library_source_never_hardcodes_cuda():
    files = sorted((ROOT / "core").rglob("*.py")) + sorted((ROOT / "plugins").rglob("*.py"))
    assert len(files) > 20  # the scan saw the real source tree
    found = [
        f"{path.relative_to(ROOT)}:{i}: {line.strip()}"
        for path in files
        for i, line in enumerate(path.read_text().splitlines(), 1)
        if any(p.search(line) for p in CUDA_ASSUMPTIONS)
    ]
    assert not found, "hardcoded CUDA:\n" + "\n".join(found)


def test_cuda_pattern_scan_catches_what_it_should():
    bad = ["x = x.cuda()", 'torch.zeros(3, device="cuda")', "t.to('cuda:0')"]
    good = ["torch.zeros(3, device=x.device)", "torch.cuda.is_available()"]
    assert all(any(p.search(s) for p in CUDA_ASSUMPTIONS) for s in bad)
    assert not any(p.search(s) for p in CUDA_ASSUMPTIONS for s in good)


# (f) a meta model describes the same model as a real one


@pytest.mark.parametrize("name", ["gpt2", "bert-base"])
def test_meta_summary_equals_cpu_summary(name):
    meta = archzoo.build_model(name, TINY, device="meta")
    cpu = archzoo.build_model(name, TINY)
    assert meta.summary() == cpu.summary()
    assert meta.num_parameters() == cpu.num_parameters()
    assert [n for n, _ in meta.named_parameters()] == [n for n, _ in cpu.named_parameters()]


def test_meta_builds_skip_initialisation_and_stay_fast():
    """Meta builds (zoo build/validate, from_hf, load) never fill tensors: the first random
    fill of a meta tensor would import torch._dynamo (seconds) for nothing."""
    import subprocess
    import sys

    code = (
        "import sys, torch, archzoo\n"
        "m = archzoo.build_model('gpt2', {'n_layers': 2}, device='meta')\n"
        "assert all(p.is_meta for p in m.parameters())\n"
        "assert 'torch._dynamo' not in sys.modules, 'meta build imported torch._dynamo'\n"
        "assert torch.nn.init.normal_.__name__ == 'normal_', 'init functions not restored'\n"
        "x = torch.empty(4); torch.nn.init.ones_(x); assert x.sum() == 4\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
