"""`zoo train`: each family learns from files on disk, resume is exact, the recipe's formulas hold."""

from __future__ import annotations

import json
import math
import random
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from click.testing import CliRunner
from hostile_util import TINY_SETS, zoo_fails

from archzoo.cli.main import main
from archzoo.training import TrainConfig, lr_factor, read_metrics, train
from archzoo.training.data import check_sources, prepare_pairs, prepare_stream
from archzoo.training.objectives import IGNORE, MaskedLM, Translation, token_loss
from archzoo.training.tokenizer import ByteTokenizer

SMALL = {"n_layers": 2, "d_model": 32, "n_heads": 4, "d_ff": 64, "vocab_size": 260, "max_len": 64}
DECODER = ("gpt2", {**SMALL, "dropout": 0.1})
ENCODER = ("bert-base", {**SMALL, "dropout": 0.0})
SEQ2SEQ = ("transformer-base", {**SMALL, "dropout": 0.0})
WORDS = "the quick brown fox jumps over a lazy dog while my cat sat on the warm mat".split()


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny matmuls run fastest on one thread (no sync overhead, no contention)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def write_corpus(path: Path, lines: int = 400, seed: int = 0) -> Path:
    rng = random.Random(seed)
    text = "\n".join(" ".join(rng.choice(WORDS) for _ in range(10)) for _ in range(lines))
    path.write_text(text + "\n", encoding="utf-8")
    return path


def write_pairs(path: Path, lines: int = 300) -> Path:
    """A copy-and-reverse task: target = source's words reversed."""
    rng = random.Random(1)
    rows = []
    for _ in range(lines):
        words = [rng.choice(WORDS) for _ in range(4)]
        rows.append(" ".join(words) + "\t" + " ".join(reversed(words)))
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def config(tmp_path: Path, data: Path, **kw) -> TrainConfig:
    base = dict(data=[str(data)], out=str(tmp_path / "run"), steps=12, batch=8, seq_len=32)
    base.update(lr=3e-3, warmup=2, eval_every=6, eval_examples=8, progress=False)
    base.update(kw)
    return TrainConfig(**base)


@pytest.mark.parametrize(
    "model", [DECODER, ENCODER, SEQ2SEQ], ids=["decoder", "encoder", "seq2seq"]
)
def test_each_family_learns_from_files(tmp_path, model):
    data = (
        write_pairs(tmp_path / "pairs.tsv")
        if model is SEQ2SEQ
        else write_corpus(tmp_path / "c.txt")
    )
    result = train(model[0], config(tmp_path, data, steps=16, eval_every=8), model[1])
    losses = [h["loss"] for h in result["history"]]
    evals = [h["eval_loss"] for h in result["history"] if "eval_loss" in h]
    assert len(losses) == 16 and len(evals) == 2
    assert math.log(260) - 0.5 < losses[0] < math.log(260) + 1.0  # starts near uniform
    assert sum(losses[-3:]) / 3 < losses[0] - 1.0  # and falls well below it
    assert evals[1] < evals[0]
    assert result["history"][-1]["eval_perplexity"] == pytest.approx(math.exp(evals[1]))
    # metrics.jsonl holds the same records, one per step
    assert read_metrics(tmp_path / "run") == json.loads(json.dumps(result["history"]))


def test_resume_reproduces_the_uninterrupted_run_exactly(tmp_path):
    data = write_corpus(tmp_path / "c.txt")
    kw = dict(steps=8, eval_every=4, save_every=2, schedule="cosine", warmup=3)
    straight = train(DECODER[0], config(tmp_path / "a", data, **kw), DECODER[1])["history"]
    # interrupted after step 5: the last checkpoint is step 4, so step 5 is redone on resume
    out = tmp_path / "b"
    train(DECODER[0], config(out, data, stop_at=5, **kw), DECODER[1])
    assert [r["step"] for r in read_metrics(out / "run")] == [1, 2, 3, 4, 5]
    train(DECODER[0], config(out, data, resume=True, **kw), DECODER[1])
    resumed = read_metrics(out / "run")
    assert [r["step"] for r in resumed] == list(range(1, 9))
    for a, b in zip(straight, resumed, strict=True):  # dropout is on: the RNG is restored too
        assert (
            a["loss"] == b["loss"]
            and a["lr"] == b["lr"]
            and a.get("eval_loss") == b.get("eval_loss")
        )


def test_checkpoint_and_model_files(tmp_path):
    from safetensors import safe_open

    import archzoo

    data = write_corpus(tmp_path / "c.txt")
    train(DECODER[0], config(tmp_path, data, steps=2, eval_every=2), DECODER[1])
    with safe_open(str(tmp_path / "run/checkpoint.safetensors"), "pt") as f:
        meta, names = f.metadata(), list(f.keys())
    assert meta["step"] == "2" and json.loads(meta["scheduler"])["last_epoch"] == 2
    assert any(n.startswith("optim.") and n.endswith(".exp_avg_sq") for n in names)
    model = archzoo.load(tmp_path / "run/model.safetensors")
    assert model.spec.data["d_model"] == 32


def test_inverse_sqrt_is_vaswani_schedule():
    d_model, warmup = 512, 4000
    peak = d_model**-0.5 * warmup**-0.5  # the schedule's value at step = warmup
    f = lr_factor("inverse_sqrt", warmup, 100_000)
    for step in (1, 10, 1000, 3999, 4000, 4001, 10_000, 100_000):
        vaswani = d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)
        assert peak * f(step) == pytest.approx(vaswani, rel=1e-12)


def test_cosine_and_constant_schedules():
    f = lr_factor("cosine", 10, 110, min_ratio=0.1)
    assert [f(s) for s in (1, 5, 10)] == pytest.approx([0.1, 0.5, 1.0])
    assert f(60) == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 0.5)))
    assert f(110) == pytest.approx(0.1)
    g = lr_factor("constant", 4, 100)
    assert [g(s) for s in (1, 2, 4, 50)] == [0.25, 0.5, 1.0, 1.0]


def test_lr_in_metrics_follows_the_schedule(tmp_path):
    data = write_corpus(tmp_path / "c.txt")
    kw = dict(steps=6, schedule="inverse_sqrt", warmup=3, lr=1e-3, eval_every=6)
    hist = train(DECODER[0], config(tmp_path, data, **kw), DECODER[1])["history"]
    f = lr_factor("inverse_sqrt", 3, 6)
    assert [h["lr"] for h in hist] == pytest.approx([1e-3 * f(s) for s in range(1, 7)], rel=1e-12)


def test_label_smoothing_is_the_smoothed_cross_entropy():
    torch.manual_seed(0)
    logits, labels = torch.randn(2, 5, 11), torch.randint(0, 11, (2, 5))
    labels[0, 1] = IGNORE
    eps = 0.1
    logp = logits.log_softmax(-1)
    keep = labels != IGNORE
    nll = -logp.gather(-1, labels.clamp(min=0)[..., None])[..., 0]
    uniform = -logp.mean(-1)  # cross-entropy against the uniform distribution over 11 ids
    expected = ((1 - eps) * nll + eps * uniform)[keep].sum()  # Szegedy et al. 2016
    assert token_loss(logits, labels, eps).item() == pytest.approx(expected.item(), rel=1e-6)


def test_mlm_masks_15_percent_with_bert_80_10_10(tmp_path):
    data = write_corpus(tmp_path / "c.txt", lines=2000)
    tok = ByteTokenizer()
    stream = prepare_stream(check_sources([data]), tok, tmp_path / "cache")
    obj = MaskedLM(stream, 64, 0, 0.01, tok.specials, tok.n_regular)
    b = obj.train_batch(1, 512, slice(0, 512))
    picked = b["labels"] != IGNORE
    original = b["labels"][picked]
    shown = b["input_ids"][picked]
    n = picked.sum().item()
    assert n / picked.numel() == pytest.approx(0.15, abs=0.005)
    assert (shown == tok.specials.mask).sum().item() / n == pytest.approx(0.8, abs=0.01)
    kept = (shown == original).sum().item() / n  # 10% kept, plus random ids that hit the original
    assert kept == pytest.approx(0.1 + 0.1 / 256, abs=0.01)
    assert torch.equal(
        b["input_ids"][~picked], obj.train_batch(1, 512, slice(0, 512))["input_ids"][~picked]
    )


def test_translation_pairs_use_teacher_forcing(tmp_path):
    data = write_pairs(tmp_path / "p.tsv", lines=20)
    tok = ByteTokenizer()
    pairs = prepare_pairs(check_sources([data]), tok, tmp_path / "cache")
    obj = Translation(pairs, 48, 0, 0.1, tok.specials, tok.specials.bos)
    b = obj.train_batch(3, 4, slice(0, 4))
    for row in range(4):
        labels = b["labels"][row]
        n = int((labels != IGNORE).sum())
        src = bytes(b["input_ids"][row][b["attention_mask"][row].bool()].tolist()).decode()
        tgt = bytes(labels[: n - 1].tolist()).decode()
        assert labels[n - 1] == tok.specials.eos and tgt == " ".join(reversed(src.split()))
        assert b["decoder_input_ids"][row, 0] == tok.specials.bos
        assert torch.equal(b["decoder_input_ids"][row, 1:n], labels[: n - 1])  # shifted right


def test_corpus_larger_than_the_memory_budget_is_memory_mapped(tmp_path):
    """A 32 MB corpus (64 MB of tokens) under a 16 MB budget: tokenising peaks below it, and
    drawing batches copies nothing into anonymous memory (touched pages are file cache)."""
    if not Path("/proc/self/clear_refs").exists():
        pytest.skip("needs Linux /proc to measure the resident set")
    line = ("the quick brown fox jumps over the lazy dog " * 100)[:-1] + "\n"
    big = tmp_path / "big.txt"
    with open(big, "w") as f:
        f.write(line * (32 * 2**20 // len(line)))
    script = f"""
import pathlib, torch
from archzoo.training.data import check_sources, prepare_stream
from archzoo.training.measure import PeakMemory, _status_kib
from archzoo.training.objectives import CausalLM
from archzoo.training.tokenizer import ByteTokenizer
tok = ByteTokenizer()
peak = PeakMemory(torch.device("cpu"))
stream = prepare_stream(check_sources([{str(big)!r}]), tok, pathlib.Path({str(tmp_path / "cache")!r}))
tokenising = peak.peak_bytes()
obj = CausalLM(stream, 128, 0, 0.01, tok.specials)
anon = _status_kib("RssAnon")
for step in range(50):
    obj.train_batch(step, 32, slice(0, 32))
obj.eval_batch(torch.arange(obj.eval_examples(64)))
print(len(stream), tokenising, (_status_kib("RssAnon") - anon) * 1024)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    count, tokenising, anon = map(int, out.stdout.split())
    assert count == big.stat().st_size + 1  # every byte, plus the end-of-document id
    assert tokenising < 16 * 2**20, (
        f"tokenising grew the resident set by {tokenising / 2**20:.1f} MB"
    )
    assert anon < 8 * 2**20, f"drawing batches grew anonymous memory by {anon / 2**20:.1f} MB"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(not dist.is_gloo_available(), reason="this torch build has no gloo backend")
def test_two_processes_equal_one_on_the_global_batch(tmp_path):
    """DDP and FSDP2 on two gloo processes, each reading its rows, match one process."""
    from train_worker import run_rank

    data = write_corpus(tmp_path / "c.txt")
    name, overrides = DECODER[0], {**DECODER[1], "dropout": 0.0}
    kw = dict(steps=4, eval_every=2, batch=8, accum=2, eval_examples=7)  # 7: uneven over ranks
    single = train(name, config(tmp_path / "one", data, **kw), overrides)["history"]
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    cfg = config(tmp_path / "two", data, **kw)
    spec = {"name": name, "overrides": overrides}
    mp.start_processes(
        run_rank, args=(2, free_port(), spec, cfg, queue), nprocs=2, start_method="spawn"
    )
    results = queue.get(timeout=300)
    for mode in ("ddp", "fsdp2"):
        for a, b in zip(single, results[mode], strict=True):
            assert a["loss"] == pytest.approx(b["loss"], abs=1e-5), mode
            assert a.get("eval_loss") == pytest.approx(b.get("eval_loss"), abs=1e-5), mode
    assert single[-1]["loss"] < single[0]["loss"] - 0.2


def cli(*args: str):
    return CliRunner().invoke(main, list(args))


@pytest.mark.parametrize(
    "problem",
    ["missing", "empty", "vocab", "seq_len", "tokenizer_json", "bad_jsonl", "bad_tsv"],
)
def test_bad_input_is_a_clear_error_before_training(tmp_path, problem):
    data = write_corpus(tmp_path / "c.txt", lines=50)
    out = tmp_path / "run"
    args = ["train", "gpt2", "--out", str(out), "--steps", "1", "--seq-len", "16", "--no-progress"]
    sets = [
        "--set",
        "n_layers=1",
        "--set",
        "d_model=16",
        "--set",
        "n_heads=2",
        "--set",
        "max_len=32",
    ]
    vocab = ["--set", "vocab_size=260"]
    if problem == "missing":
        r, expect = (
            cli(*args, *sets, *vocab, "--data", str(tmp_path / "nope.txt")),
            "nope.txt: no such file",
        )
    elif problem == "empty":
        (tmp_path / "e.txt").write_text("")
        r, expect = (
            cli(*args, *sets, *vocab, "--data", str(tmp_path / "e.txt")),
            "e.txt: file is empty",
        )
    elif problem == "vocab":
        r, expect = (
            cli(*args, *sets, "--set", "vocab_size=100", "--data", str(data)),
            "has 260 ids but spec 'gpt2' has vocab_size 100",
        )
    elif problem == "seq_len":
        r = cli(*args[:-3], "--seq-len", "64", "--no-progress", *sets, *vocab, "--data", str(data))
        expect = "--seq-len 64 is above the decoder max_len 32"
    elif problem == "tokenizer_json":
        from tokenizers import Tokenizer, models

        words = {w: i for i, w in enumerate(["[UNK]", *(f"w{i}" for i in range(299))])}
        Tokenizer(models.WordLevel(words, unk_token="[UNK]")).save(str(tmp_path / "tokenizer.json"))
        r = cli(
            *args,
            *sets,
            *vocab,
            "--data",
            str(data),
            "--tokenizer",
            str(tmp_path / "tokenizer.json"),
        )
        expect = "has 300 ids but spec 'gpt2' has vocab_size 260"
    elif problem == "bad_jsonl":
        (tmp_path / "d.jsonl").write_text('{"text": "ok"}\n{"txt": 1}\n')
        r, expect = (
            cli(*args, *sets, *vocab, "--data", str(tmp_path / "d.jsonl")),
            'd.jsonl:2: expected a string or an object with a "text" string',
        )
    else:
        (tmp_path / "p.tsv").write_text("a\tb\nno tab here\n")
        args[1] = "transformer-base"
        r, expect = (
            cli(*args, *sets, *vocab, "--data", str(tmp_path / "p.tsv")),
            "p.tsv:2: expected two tab-separated columns",
        )
    assert r.exit_code == 2, r.output
    assert r.output.startswith("Error: ") and expect in r.output
    assert not (out / "metrics.jsonl").exists()


@pytest.mark.parametrize(
    "option, value, words",
    [
        ("--lr", "inf", "--lr must be a finite number >= 0, got inf"),  # trained to NaN
        ("--lr", "nan", "--lr must be a finite number >= 0, got nan"),
        ("--weight-decay", "nan", "--weight-decay must be a finite number >= 0, got nan"),
        ("--weight-decay", "-1", "--weight-decay must be a finite number >= 0, got -1"),
        ("--min-lr-ratio", "-5", "--min-lr-ratio must be in [0, 1], got -5"),  # lr < 0
        ("--min-lr-ratio", "nan", "--min-lr-ratio must be in [0, 1], got nan"),
        ("--beta2", "1.5", "--beta2 must be in [0, 1), got 1.5"),
        ("--clip", "-1", "--clip must be a finite number >= 0, got -1"),  # was: no clipping
        ("--clip", "nan", "--clip must be a finite number >= 0, got nan"),
    ],
)
def test_out_of_range_numbers_are_refused_before_training(tmp_path, option, value, words):
    data = write_corpus(tmp_path / "c.txt", lines=20)
    out = tmp_path / "run"
    args = ["train", "gpt2", "--data", data, "--out", out, "--steps", "1", "--seq-len", "16"]
    zoo_fails([*args, "--no-progress", *TINY_SETS, "--set", "vocab_size=260", option, value], words)
    assert not out.exists()


@pytest.mark.parametrize(
    "device, words",
    [
        ("nope", "--device 'nope': expected cpu, cuda, cuda:N"),  # was a RuntimeError traceback
        ("meta", "--device meta holds no data"),
        ("mps", "--device mps: no mps device is usable here"),
        ("cuda:99", "--device cuda:99"),  # no CUDA here, or fewer than 100 GPUs
    ],
)
def test_unusable_device_is_refused_before_training(tmp_path, device, words):
    data = write_corpus(tmp_path / "c.txt", lines=20)
    out = tmp_path / "run"
    args = ["train", "gpt2", "--data", data, "--out", out, "--steps", "1", "--seq-len", "16"]
    zoo_fails(
        [*args, "--no-progress", *TINY_SETS, "--set", "vocab_size=260", "--device", device], words
    )
    assert not out.exists()


@pytest.mark.parametrize("command", ["train", "export"])
@pytest.mark.parametrize("seed", [str(2**64), str(-(2**63) - 1)])
def test_a_seed_torch_cannot_take_is_refused_naming_the_option(tmp_path, command, seed):
    """It was torch's 'Overflow when unpacking long long', after the data or model was read."""
    args = [command, "gpt2", *TINY_SETS, "--seed", seed]
    args += ["--data", tmp_path / "c.txt"] if command == "train" else ["--hf", tmp_path / "hf"]
    zoo_fails(args, "--seed", f"{seed} is out of range: a seed is an integer in [-2**63, 2**64)")


def test_a_lone_surrogate_in_jsonl_is_refused_naming_the_line(tmp_path):
    """Valid JSON, invalid text: it was "'utf-8' codec can't encode character" with no file."""
    data = tmp_path / "d.jsonl"
    data.write_text('{"text": "fine \\u00e9 \\ud83d\\ude00"}\n{"text": "a\\udc80b"}\n')
    args = ["train", "gpt2", "--data", data, "--out", tmp_path / "run", "--steps", "1"]
    args += ["--seq-len", "16", "--no-progress", *TINY_SETS, "--set", "vocab_size=260"]
    zoo_fails(args, "d.jsonl:2: the text has a lone surrogate (\\udc80), not valid Unicode")


@pytest.mark.parametrize("command", ["train", "compare"])
def test_out_that_is_the_data_directory_or_a_file_is_refused(tmp_path, command):
    """--out DIR = --data DIR put metrics.jsonl, checkpoint.safetensors (train) or results.json
    (compare) among the data: read as training text on the next run or resume. --out FILE was
    '[Errno 17] File exists'."""
    data = tmp_path / "corpus"
    data.mkdir()
    write_corpus(data / "c.txt", lines=50)
    args = [command, "gpt2", "--data", data, "--steps", "1", "--seq-len", "16", "--no-progress"]
    args += [*TINY_SETS, "--set", "vocab_size=260"] + (
        ["--no-plot"] if command == "compare" else []
    )
    zoo_fails([*args, "--out", data], f"--out {data} is the --data directory", "another --out")
    zoo_fails([*args, "--out", data / "c.txt"], "c.txt: exists and is not a directory")
    assert [p.name for p in data.iterdir()] == ["c.txt"]


def rewrite_checkpoint(path: Path, change) -> None:  # noqa: ANN001 - change(meta, tensors)
    from safetensors import safe_open
    from safetensors.torch import save_file

    with safe_open(str(path), "pt") as f:
        meta, tensors = dict(f.metadata()), {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118
    change(meta, tensors)
    save_file(tensors, str(path), metadata=meta)


DAMAGE = {  # each was a traceback, or (missing tensors) a silent resume from fresh values
    "step-text": (lambda m, t: m.update(step="abc"), "step or info"),
    "step-negative": (lambda m, t: m.update(step="-5"), "expected a step >= 0"),
    "info-list": (lambda m, t: m.update(info="[1]"), "an info object with spec and config"),
    "info-spec": (lambda m, t: m.update(info='{"spec": 1}'), "info object with spec"),
    "scheduler": (lambda m, t: m.update(scheduler="[]"), "damaged training checkpoint"),
    "param-groups": (lambda m, t: m.update(param_groups="{}"), "optimizer parameter groups"),
    "model-tensor": (
        lambda m, t: t.pop("model.decoder.embedding.word.weight"),
        "missing: ['decoder.embedding.word.weight']",
    ),
    "optimizer": (
        lambda m, t: [t.pop(k) for k in list(t) if k.startswith("optim.")],
        "the optimizer state",
    ),
    "shape": (
        lambda m, t: t.update({"model.decoder.embedding.word.weight": torch.ones(3)}),
        "size mismatch",
    ),
    "stray": (lambda m, t: t.update(stray=torch.ones(1)), "tensor 'stray'"),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_checkpoint_is_refused_on_resume(tmp_path, damage):
    data = write_corpus(tmp_path / "c.txt", lines=50)
    args = ["train", "gpt2", "--data", data, "--out", tmp_path / "run", "--steps", "2"]
    args += ["--seq-len", "16", "--no-progress", *TINY_SETS, "--set", "vocab_size=260"]
    first = CliRunner().invoke(main, [str(a) for a in [*args, "--stop-at", "1"]])
    assert first.exit_code == 0, first.output
    change, words = DAMAGE[damage]
    rewrite_checkpoint(tmp_path / "run" / "checkpoint.safetensors", change)
    zoo_fails([*args, "--resume"], "checkpoint.safetensors: damaged training checkpoint", words)


def test_resuming_a_run_of_another_spec_is_refused(tmp_path):
    data = write_corpus(tmp_path / "c.txt", lines=50)
    base = ["train", "gpt2", "--out", str(tmp_path / "run"), "--data", str(data), "--steps", "2"]
    base += ["--seq-len", "16", "--no-progress", "--set", "n_layers=1", "--set", "d_model=16"]
    base += ["--set", "n_heads=2", "--set", "vocab_size=260"]
    first = cli(*base, "--stop-at", "1")
    assert first.exit_code == 0, first.output
    again = cli(*base)
    assert again.exit_code == 2 and "already holds a run; pass --resume" in again.output
    other = cli(*base, "--set", "d_ff=48", "--resume")
    assert other.exit_code == 2, other.output
    assert (
        "the checkpoint is from spec 'gpt2', not 'gpt2' as given (differs in: d_ff)" in other.output
    )
    assert [r["step"] for r in read_metrics(tmp_path / "run")] == [1]
    fresh = cli(*base[:3], str(tmp_path / "new"), *base[4:], "--resume")
    assert fresh.exit_code == 2 and "holds no checkpoint.safetensors" in fresh.output


def test_cli_trains_and_reports(tmp_path):
    data = write_corpus(tmp_path / "c.jsonl", lines=0)
    rng = random.Random(0)
    data.write_text(
        "".join(
            json.dumps({"text": " ".join(rng.choice(WORDS) for _ in range(12))}) + "\n"
            for _ in range(300)
        )
    )
    r = cli(
        "train",
        "gpt2",
        "--data",
        str(data),
        "--out",
        str(tmp_path / "run"),
        "--steps",
        "4",
        "--batch",
        "4",
        "--seq-len",
        "16",
        "--eval-every",
        "2",
        "--no-progress",
        "--label-smoothing",
        "0.1",
        "--set",
        "n_layers=1",
        "--set",
        "d_model=16",
        "--set",
        "n_heads=2",
        "--set",
        "vocab_size=260",
    )
    assert r.exit_code == 0, r.output
    records = read_metrics(tmp_path / "run")
    assert (
        f"step 4: loss {records[-1]['loss']:.4f}, eval loss {records[-1]['eval_loss']:.4f}"
        in r.output
    )


def test_a_killed_run_resumes_from_its_last_checkpoint(tmp_path):
    """SIGKILL mid-run: the checkpoint on disk is whole, and --resume continues right after it."""
    import os
    import signal
    import time

    from archzoo.training.checkpoint import read_info

    data = write_corpus(tmp_path / "c.txt")
    out = tmp_path / "run"
    args = ["train", "gpt2", "--data", str(data), "--out", str(out), "--steps", "10000"]
    args += ["--batch", "4", "--seq-len", "16", "--save-every", "2", "--no-progress"]
    for s in ("n_layers=1", "d_model=16", "n_heads=2", "vocab_size=260", "max_len=32"):
        args += ["--set", s]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "archzoo.cli", *args], env=env)
    try:
        deadline = time.time() + 240
        while not (out / "metrics.jsonl").is_file() or len(read_metrics(out)) < 5:
            assert proc.poll() is None and time.time() < deadline, "the run did not get going"
            time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    step, info = read_info(out / "checkpoint.safetensors")  # never a half-written file
    logged = len(read_metrics(out))
    assert step >= 4 and step % 2 == 0 and logged - step <= 2  # lost: the steps after it
    r = cli(*args, "--resume", "--stop-at", str(step + 2))
    assert r.exit_code == 0, r.output
    assert [m["step"] for m in read_metrics(out)] == list(range(1, step + 3))


def test_tokenizer_json_with_special_tokens_trains_an_encoder(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {
        w: i
        for i, w in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *sorted(set(WORDS))])
    }
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(tmp_path / "tokenizer.json"))
    data = write_corpus(tmp_path / "c.txt", lines=600)
    cfg = config(tmp_path, data, tokenizer=str(tmp_path / "tokenizer.json"), steps=16, eval_every=8)
    hist = train(ENCODER[0], cfg, {**ENCODER[1], "vocab_size": len(vocab)})["history"]
    assert hist[0]["loss"] == pytest.approx(math.log(len(vocab)), abs=0.7)
    assert hist[-1]["eval_loss"] < hist[7]["eval_loss"] < hist[0]["loss"]
