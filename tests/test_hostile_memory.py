"""Work whose memory need is known beforehand is refused with the number before allocating:
builds on a real device, `zoo build --out`, generation caches, `zoo mask`, loading a file."""

from __future__ import annotations

import pytest
import torch
from click.testing import CliRunner
from hostile_util import TINY, TINY_SETS, assert_clean_failure, zoo_fails, zoo_subprocess

import archzoo
from archzoo import memory
from archzoo.cli.main import main
from archzoo.memory import MemoryNeedError, available_bytes, format_bytes
from archzoo.model.builder import model_bytes

# 235.8e9 parameters, 878 GiB of float32 weights: more than a test machine has, within limits
HUGE = {"n_layers": 200, "d_model": 16384, "n_heads": 128}
HUGE_SETS = [a for k, v in HUGE.items() for a in ("--set", f"{k}={v}")]


@pytest.fixture
def little_memory(monkeypatch):
    """Pretend the device has `limit[0]` bytes free."""
    limit = [0]
    monkeypatch.setattr(memory, "available_bytes", lambda device: limit[0])
    return limit


def test_available_memory_is_known_and_plausible():
    free = available_bytes("cpu")
    assert free is not None and 2**20 < free < 2**50
    assert available_bytes("meta") is None  # nothing to run out of


@pytest.mark.parametrize(
    "n, text",
    [
        (0, "0 B"),
        (1023, "1023 B"),
        (1536, "1.5 KiB"),
        (3 * 2**30, "3.0 GiB"),
        (2**60, "1024.0 PiB"),
    ],
)
def test_bytes_are_printed_in_binary_units(n, text):
    assert format_bytes(n) == text


def test_huge_build_on_a_real_device_is_refused_with_the_number():
    spec = archzoo.load_spec("gpt2", HUGE)
    need = model_bytes(spec)
    assert need == 943_005_401_088 == 4 * 235_751_350_272  # 4 bytes per parameter
    with pytest.raises(MemoryNeedError) as err:
        archzoo.build_model(spec, device="cpu")
    text = str(err.value)
    assert f"building 'gpt2' needs about {format_bytes(need)} ({need:,} bytes) on cpu" in text
    assert "device='meta'" in text
    assert (
        archzoo.build_model(spec, device="meta").num_parameters() * 4 <= need
    )  # meta still builds


def test_build_refusal_counts_parameters_and_buffers_exactly(little_memory):
    spec = archzoo.load_spec("gpt2", TINY)
    model = archzoo.build_model(spec, device="meta")
    want = sum(p.numel() * 4 for p in model.parameters()) + sum(
        b.numel() * b.element_size() for b in model.buffers()
    )
    assert model_bytes(spec) == want  # the tied LM head counted once
    little_memory[0] = want - 1
    with pytest.raises(MemoryNeedError, match=f"needs about .* \\({want:,} bytes\\) on cpu"):
        archzoo.build_model(spec)
    little_memory[0] = want
    assert archzoo.build_model(spec).num_parameters() == model.num_parameters()


def test_zoo_build_out_of_a_huge_spec_is_refused_before_allocating(tmp_path):
    out = tmp_path / "m.safetensors"
    run = zoo_subprocess(["build", "gpt2", *HUGE_SETS, "--out", out])  # 3 GiB address space
    assert_clean_failure(run, "building 'gpt2' needs about 878.2 GiB", "is available")
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_zoo_build_without_out_still_summarises_a_huge_spec():
    run = zoo_subprocess(["build", "gpt2", *HUGE_SETS, "--json"])
    assert run.returncode == 0, run.stderr
    assert '"params": 235751350272' in run.stdout  # counted on meta


@pytest.mark.parametrize("length", [65536, 40000])
def test_zoo_mask_of_a_huge_length_is_refused_with_the_number(length, little_memory):
    little_memory[0] = 2**30
    need = 16 * length * length
    zoo_fails(
        ["mask", "gpt2", "--len", str(length)],
        f"the {length}x{length} mask of decoder layer 0 (mha) needs about {format_bytes(need)}",
        f"({need:,} bytes)",
        "only 1.0 GiB is available",
        "--len",
    )


def test_zoo_mask_that_fits_still_draws(little_memory):
    little_memory[0] = 16 * 64 * 64
    result = CliRunner().invoke(main, ["mask", "gpt2", "--len", "64"])
    assert result.exit_code == 0, result.output
    assert result.output.count("|") == 2 * 64  # one row per query


def test_zoo_mask_65536_in_a_subprocess_ends_fast_with_exit_2():
    run = zoo_subprocess(["mask", "longformer-base", "--len", "65536"])
    assert_clean_failure(run, "65536x65536 mask", "needs about 64.0 GiB", "--len")


GEN = {**TINY, "max_len": 2**20}  # rotary: no position table, so only memory bounds a request


@pytest.fixture(scope="module")
def rotary():
    extra = {"head_dim": 8, "attention.n_kv_heads": 1, "bos_token_id": 1, "eos_token_id": 2}
    return archzoo.build_model("llama3.2-1b", {**GEN, **extra}).eval()


def test_generation_whose_cache_cannot_fit_is_refused_before_decoding(rotary, little_memory):
    little_memory[0] = 10**6
    steps = []
    with pytest.raises(MemoryNeedError) as err:
        rotary.generate(
            torch.ones(4, 3, dtype=torch.long), max_new_tokens=100_000, on_token=steps.append
        )
    assert steps == []
    # K and V of one layer: 2 x 1 kv head x 8 dims x 4 bytes per token and row, + int64 buffer
    need = 4 * 100_003 * (2 * 8 * 4 + 8)
    assert (
        f"generating max_new_tokens=100000 for 4 rows (KV cache and token buffers) needs about {format_bytes(need)} ({need:,} bytes)"
        in str(err.value)
    )


def test_beam_search_counts_every_beam(rotary, little_memory):
    little_memory[0] = 10**6
    with pytest.raises(MemoryNeedError, match="for 12 rows"):
        rotary.generate(torch.ones(4, 3, dtype=torch.long), max_new_tokens=10_000, num_beams=3)
    little_memory[0] = 10**9
    out = rotary.generate(torch.ones(1, 3, dtype=torch.long), max_new_tokens=4, num_beams=3)
    assert out.shape[0] == 1 and 4 <= out.shape[1] <= 7


def test_a_billion_new_tokens_is_refused_on_the_real_machine(rotary):
    with pytest.raises(MemoryNeedError, match="max_new_tokens=1000000000 for 2 rows"):
        rotary.generate(torch.ones(2, 3, dtype=torch.long), max_new_tokens=10**9)


def test_loading_a_file_larger_than_memory_is_refused(tmp_path, little_memory):
    path = tmp_path / "m.safetensors"
    little_memory[0] = 2**40
    archzoo.save(archzoo.build_model("gpt2", TINY), path)
    little_memory[0] = path.stat().st_size - 1
    with pytest.raises(MemoryNeedError, match=f"loading {path} needs about"):
        archzoo.load(path)
    zoo_fails(["generate", path, "--prompt", "hi"], "needs about", "is available")


def test_zoo_train_of_a_huge_batch_is_refused_before_reading_data(tmp_path):
    """--batch 10**12 was a RuntimeError traceback from the CPU allocator (8 TB of starts)."""
    data = tmp_path / "c.txt"
    data.write_text("the cat sat on the mat\n" * 50)
    args = ["train", "gpt2", "--data", data, "--out", tmp_path / "run", "--steps", "1"]
    args += ["--seq-len", "16", "--no-progress", "--batch", str(10**12)]
    run = zoo_subprocess([*args, *TINY_SETS, "--set", "vocab_size=260"])
    assert_clean_failure(
        run, "a step of --batch 1,000,000,000,000 sequences", "131.0 TiB", "lower --batch"
    )
    assert not (tmp_path / "run").exists()
