"""Hostile input, round 3, category 1: concurrent writers and torn reads, with real threads and
processes (no mocks).

Saves by two threads to one path, loads racing a saving process, and two `zoo train` runs on
one --out: every outcome is one whole version, or a clear refusal naming the other run.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from hostile_util import TINY, TINY_SETS, zoo_fails

import archzoo
from archzoo.cli.main import main
from archzoo.io.safe_write import TEMP_SUFFIX
from archzoo.training import read_metrics
from archzoo.training.checkpoint import read_info

# wide enough (about 1 MB) that two writes overlap in time
WIDE = {**TINY, "d_model": 64, "d_ff": 64, "vocab_size": 4096}


def filled(value: float, name: str, sizes: dict = TINY) -> archzoo.ZooModel:
    """A model whose every tensor holds `value`, named `name`: a version told apart by both."""
    model = archzoo.build_model("gpt2", {**sizes, "name": name})
    with torch.no_grad():
        for t in model.state_dict().values():
            t.fill_(value)
    return model


def same_weights(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_two_threads_saving_to_one_path_leave_one_whole_model(tmp_path):
    """They shared one temp name: the file loaded as neither model, or one thread was told
    'no file was changed' while the other had replaced it."""
    path = tmp_path / "m.safetensors"
    models = [filled(0.25, "first", WIDE), filled(0.5, "second", WIDE)]
    start, errors = threading.Barrier(2), []

    def save_often(model: archzoo.ZooModel) -> None:
        start.wait()
        try:
            for _ in range(15):
                archzoo.save(model, path)
        except Exception as exc:  # noqa: BLE001 - every failure is the finding
            errors.append(exc)

    threads = [threading.Thread(target=save_often, args=(m,)) for m in models]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    loaded = archzoo.load(path)
    winner = next(m for m in models if m.spec.name == loaded.spec.name)
    assert same_weights(loaded, winner)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.safetensors"]  # no temp left


SAVER = """
import sys, time, torch, archzoo
path, stop = sys.argv[1], sys.argv[2]
sizes = {sizes}
models = []
for value, name in ((0.25, "first"), (0.5, "second")):
    model = archzoo.build_model("gpt2", {{**sizes, "name": name}})
    with torch.no_grad():
        for t in model.state_dict().values():
            t.fill_(value)
    models.append(model)
archzoo.save(models[0], path)
deadline = time.monotonic() + 60
i = 0
while not __import__("os").path.exists(stop) and time.monotonic() < deadline:
    i += 1
    archzoo.save(models[i % 2], path)
print(i)
"""


def test_a_load_racing_a_saving_process_gets_one_version(tmp_path):
    """load read the spec and the tensors through two opens: one version's spec came with the
    other version's tensors about one load in five."""
    path, stop = tmp_path / "m.safetensors", tmp_path / "stop"
    code = SAVER.format(sizes=TINY)
    saver = subprocess.Popen(
        [sys.executable, "-c", code, str(path), str(stop)], text=True, stdout=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 60
        while not path.exists():
            assert saver.poll() is None and time.monotonic() < deadline, "the saver did not start"
            time.sleep(0.05)
        seen, loads = set(), 0
        end = math.inf  # 1.5 s past the moment both versions were seen
        while time.monotonic() < end:
            assert time.monotonic() < deadline, f"only saw {seen} in {loads} loads"
            model = archzoo.load(path)
            values = {float(v) for t in model.state_dict().values() for v in t.unique()}
            expected = {"first": {0.25}, "second": {0.5}}[model.spec.name]
            assert values == expected, (model.spec.name, values, loads)
            seen.add(model.spec.name)
            loads += 1
            if len(seen) == 2 and end == math.inf:
                end = time.monotonic() + 1.5
    finally:
        stop.touch()
        saves = int(saver.communicate(timeout=60)[0])
    assert saves > 2 and loads > 10, (saves, loads)
    assert not list(tmp_path.glob(f"*{TEMP_SUFFIX}"))


def corpus(path: Path) -> Path:
    words = "the quick brown fox jumps over a lazy dog while my cat sat".split()
    path.write_text("\n".join(" ".join(words[i:] + words[:i]) for i in range(13)) * 20 + "\n")
    return path


def train_args(data: Path, out: Path, steps: int) -> list[str]:
    args = ["train", "gpt2", "--data", data, "--out", out, "--steps", steps, "--batch", "2"]
    args += ["--seq-len", "16", "--save-every", "1", "--eval-every", "1000", "--no-progress"]
    return [str(a) for a in [*args, *TINY_SETS, "--set", "vocab_size=260"]]


def test_a_second_zoo_train_on_one_out_is_refused(tmp_path):
    """Two runs on one --out trained side by side and wrote duplicate steps to metrics.jsonl.
    The second is refused naming the first's PID; once the first is SIGKILLed its lock does
    not block a resume."""
    data, out = corpus(tmp_path / "c.txt"), tmp_path / "run"
    args = train_args(data, out, 100_000)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    first = subprocess.Popen([sys.executable, "-m", "archzoo.cli", *args], env=env)
    try:
        deadline = time.monotonic() + 120
        while not (out / "checkpoint.safetensors").is_file():
            assert first.poll() is None and time.monotonic() < deadline, "the run did not start"
            time.sleep(0.1)
        before = len(read_metrics(out))
        ahead = read_info(out / "checkpoint.safetensors")[0] + 50  # were it not refused: 50
        bounded = [*args, "--resume", "--stop-at", str(ahead)]  # steps beside the first run
        zoo_fails(bounded, f"--out {out} is in use by PID {first.pid}")
        zoo_fails(args, f"--out {out} is in use by PID {first.pid}")
        while len(read_metrics(out)) < before + 2:  # the first run goes on undisturbed
            assert first.poll() is None and time.monotonic() < deadline, "the first run stopped"
            time.sleep(0.1)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    step, _ = read_info(out / "checkpoint.safetensors")
    steps = [r["step"] for r in read_metrics(out)]
    assert steps == list(range(1, len(steps) + 1))  # no step twice, none missing
    resumed = CliRunner().invoke(main, [*train_args(data, out, step + 1), "--resume"])
    assert resumed.exit_code == 0, resumed.output
    assert [r["step"] for r in read_metrics(out)] == list(range(1, step + 2))


@pytest.mark.parametrize("threads", [2])
def test_token_cache_built_by_two_threads_is_one_whole_cache(threads, tmp_path):
    """Both tokenised into one temp name (tokens.bin.PID.tmp); one rename then failed."""
    from archzoo.training.data import check_sources, prepare_stream
    from archzoo.training.tokenizer import ByteTokenizer

    files = check_sources([str(corpus(tmp_path / "c.txt"))])
    start, results, errors = threading.Barrier(threads), [], []

    def build() -> None:
        start.wait()
        try:
            results.append(prepare_stream(files, ByteTokenizer(), tmp_path / "cache").tokens)
        except Exception as exc:  # noqa: BLE001 - every failure is the finding
            errors.append(exc)

    workers = [threading.Thread(target=build) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
    assert not errors, errors
    expected = torch.tensor(list(files[0].read_bytes()) + [ByteTokenizer().specials.eos])
    for tokens in results:
        assert torch.equal(tokens.long(), expected)
    names = sorted(p.name for p in (tmp_path / "cache").iterdir())
    assert names == ["docs.bin", "tokens.bin", "tokens.json"]


def test_two_threads_exporting_to_one_directory_leave_one_whole_export(tmp_path):
    """Both staged the export in `.hf.PID.archzoo-export-tmp`: the second deleted the first's
    staging directory, both wrote into one, and the last rename failed with a bare OSError."""
    from archzoo.hf.files import TEMP_SUFFIX as EXPORT_TEMP
    from archzoo.hf.files import staged_directory

    target = tmp_path / "hf"
    start, errors, done = threading.Barrier(2), [], []

    def export(tag: str) -> None:
        try:
            with staged_directory(target) as tmp:
                start.wait(30)  # both are staging at once
                for i in range(20):
                    (tmp / f"part{i}").write_text(tag)
            done.append(tag)
        except Exception as exc:  # noqa: BLE001 - every failure is the finding
            errors.append(exc)

    threads = [threading.Thread(target=export, args=(t,)) for t in ("first", "second")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert all(isinstance(e, archzoo.WeightsError) for e in errors), errors
    assert all(f"cannot write {target}" in str(e) for e in errors), errors
    assert len(done) + len(errors) == 2 and done
    contents = {p.read_text() for p in target.iterdir()}
    assert len(list(target.iterdir())) == 20 and len(contents) == 1 and contents <= set(done)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hf"]  # no staging left
    assert not list(tmp_path.glob(f"*{EXPORT_TEMP}"))


HF_SAVER = """
import os, sys, time, torch
from archzoo.io.safe_write import write_safetensors
path, stop = sys.argv[1], sys.argv[2]
shapes = {shapes}
versions = []
for v in (1, 2):  # values differ per tensor and per version; version 2 is stored in reverse
    names = sorted(shapes) if v == 1 else sorted(shapes, reverse=True)
    versions.append({{k: torch.full(shapes[k], 100.0 * v + i) for i, k in enumerate(names)}})
deadline = time.monotonic() + 60
i = 0
while not os.path.exists(stop) and time.monotonic() < deadline:
    i += 1
    write_safetensors(path, versions[i % 2], {{"format": "pt"}})
print(i)
"""


def test_an_hf_import_racing_a_rewrite_of_its_weights_gets_one_version(tmp_path):
    """from_hf read the header through one open and each tensor through another: a file
    replaced in between gave tensors read at the other version's offsets."""
    from hostile_util import GPT2_SHAPES, hf_gpt2

    from archzoo.io.safe_write import write_safetensors

    references = []
    for v in (2, 1):  # the two versions, each imported from a directory nobody touches
        d = hf_gpt2(tmp_path / f"v{v}")
        names = sorted(GPT2_SHAPES) if v == 1 else sorted(GPT2_SHAPES, reverse=True)
        tensors = {k: torch.full(GPT2_SHAPES[k], 100.0 * v + i) for i, k in enumerate(names)}
        write_safetensors(d / "model.safetensors", tensors, {"format": "pt"})
        references.append(archzoo.from_hf(d))
    d, stop = hf_gpt2(tmp_path / "hf"), tmp_path / "stop"
    write_safetensors(d / "model.safetensors", tensors, {"format": "pt"})  # version 1 at first
    code = HF_SAVER.format(shapes=GPT2_SHAPES)
    saver = subprocess.Popen(
        [sys.executable, "-c", code, str(d / "model.safetensors"), str(stop)],
        text=True,
        stdout=subprocess.PIPE,
    )
    try:
        seen, loads = set(), 0
        deadline = time.monotonic() + 60
        end = math.inf  # 1.5 s past the moment both versions were seen
        while time.monotonic() < end:
            assert time.monotonic() < deadline, f"only saw {seen} in {loads} loads"
            model = archzoo.from_hf(d)
            match = [v for v, ref in enumerate(references) if same_weights(model, ref)]
            assert len(match) == 1, (loads, model.state_dict()["decoder.final_norm.weight"][:2])
            seen.add(match[0])
            loads += 1
            if len(seen) == 2 and end == math.inf:
                end = time.monotonic() + 1.5
    finally:
        stop.touch()
        saves = int(saver.communicate(timeout=60)[0])
    assert saves > 2 and loads > 10, (saves, loads)
