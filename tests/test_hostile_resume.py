"""Hostile input, round 3, category 2: resuming `zoo train` from damaged run state.

A run stopped at step 2 of 4 is copied, damaged, and resumed through the CLI. Damage that
archzoo can repair (a partial last metrics line, a token cache that fails its size and hash
check) gives the same numbers as the undamaged resume; damage it cannot is refused naming the
file and line, with the run directory byte-identical.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from hostile_util import TINY_SETS, snapshot, zoo_fails

from archzoo.cli.main import main
from archzoo.training import read_metrics

WORDS = "the quick brown fox jumps over a lazy dog while my cat sat".split()


def run_args(data: Path, out: Path, *extra: object) -> list[str]:
    args = ["train", "gpt2", "--data", data, "--out", out, "--steps", "4", "--batch", "2"]
    args += ["--seq-len", "16", "--save-every", "1", "--eval-every", "2", "--no-progress"]
    return [str(a) for a in [*args, *TINY_SETS, "--set", "vocab_size=260", *extra]]


def zoo_ok(args: list[str]) -> str:
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


def numbers(out: Path) -> list[tuple]:
    """What a run computed, step by step (not its speed)."""
    return [(r["step"], r["loss"], r["lr"], r.get("eval_loss")) for r in read_metrics(out)]


@pytest.fixture(scope="module")
def stopped(tmp_path_factory) -> tuple[Path, Path]:
    """The data file and a run directory stopped after step 2 (checkpoint at step 2)."""
    root = tmp_path_factory.mktemp("base")
    data = root / "c.txt"
    data.write_text("\n".join(" ".join(WORDS[i:] + WORDS[:i]) for i in range(13)) * 20 + "\n")
    zoo_ok(run_args(data, root / "run", "--stop-at", "2"))
    return data, root / "run"


@pytest.fixture(scope="module")
def reference(stopped, tmp_path_factory) -> list[tuple]:
    """The numbers of the undamaged resume to step 4."""
    data, run = stopped
    out = tmp_path_factory.mktemp("ref") / "run"
    shutil.copytree(run, out)
    zoo_ok(run_args(data, out, "--resume"))
    return numbers(out)


@pytest.fixture
def copy(stopped, tmp_path) -> tuple[Path, Path]:
    data, run = stopped
    shutil.copytree(run, tmp_path / "run")
    return data, tmp_path / "run"


# ---------------------------------------------------------------- metrics.jsonl


def test_a_partial_last_metrics_line_is_dropped(copy, reference):
    """A run killed while appending leaves half a line: resume was a JSONDecodeError traceback."""
    data, out = copy
    with open(out / "metrics.jsonl", "a") as f:
        f.write('{"step": 3, "loss": 2.7')
    assert len(read_metrics(out)) == 2  # readers skip it too
    zoo_ok(run_args(data, out, "--resume"))
    assert numbers(out) == reference


# id, the metrics.jsonl text, the line at fault, what the message says about it
BAD_METRICS = [
    ("list", '{"step": 1}\n[1, 2]\n', 2, 'expected a JSON object with an integer "step"'),
    ("string", '"step"\n{"step": 2}\n', 1, 'expected a JSON object with an integer "step"'),
    ("no-step", '{"step": 1}\n{"loss": 2.0}\n', 2, 'expected a JSON object with an integer "step"'),
    ("step-text", '{"step": "1"}\n', 1, 'expected a JSON object with an integer "step"'),
    ("bad-json", '{"step": 1}\n{"step": 2,,}\n{"step": 3}\n', 2, "not valid JSON"),
    ("bad-last-line", '{"step": 1}\n{"step": 2,,}\n', 2, "not valid JSON"),
    ("not-utf8", '{"step": 1}\n\xff\n', 2, "not valid JSON"),
]


@pytest.mark.parametrize(
    "text, line, words", [c[1:] for c in BAD_METRICS], ids=[c[0] for c in BAD_METRICS]
)
def test_a_damaged_metrics_line_is_refused_naming_file_and_line(copy, text, line, words):
    data, out = copy
    (out / "metrics.jsonl").write_bytes(text.encode("latin-1"))
    before = snapshot(out)
    zoo_fails(run_args(data, out, "--resume"), f"{out / 'metrics.jsonl'}:{line}: ", words)
    assert snapshot(out) == before


# ---------------------------------------------------------------- the token cache


def garble(path: Path) -> None:
    """The same size, other bytes: a cache that only a hash tells from the real one."""
    raw = bytearray(path.read_bytes())
    raw[: len(raw) // 2] = bytes(len(raw) // 2)
    path.write_bytes(bytes(raw))


def count_of_tokens(d: Path, count: object) -> None:
    meta = json.loads((d / "tokens.json").read_text())
    meta["files"]["tokens.bin"]["count"] = count
    (d / "tokens.json").write_text(json.dumps(meta))


TOKEN_DAMAGE = {
    "json-truncated": lambda d: (d / "tokens.json").write_text('{"fingerprint": {"form'),
    "json-list": lambda d: (d / "tokens.json").write_text("[1, 2]"),
    "json-not-utf8": lambda d: (d / "tokens.json").write_bytes(b'{"count": "\xff"}'),
    "json-count-too-big": lambda d: count_of_tokens(d, 10**9),
    "json-count-text": lambda d: count_of_tokens(d, "7"),
    "bin-truncated": lambda d: (d / "tokens.bin").write_bytes((d / "tokens.bin").read_bytes()[:99]),
    "bin-empty": lambda d: (d / "tokens.bin").write_bytes(b""),
    "bin-garbled": lambda d: garble(d / "tokens.bin"),
    "bin-missing": lambda d: (d / "tokens.bin").unlink(),
    "docs-garbled": lambda d: garble(d / "docs.bin"),
}


CACHE_FILES = ["docs.bin", "tokens.bin", "tokens.json"]


@pytest.mark.parametrize("damage", sorted(TOKEN_DAMAGE))
def test_a_damaged_token_cache_is_rebuilt(copy, reference, damage):
    """Tracebacks (JSONDecodeError, AttributeError, torch's file-size RuntimeError), or with a
    garbled tokens.bin of the right size, a silent resume on other tokens."""
    data, out = copy
    cache = snapshot(out / "data")
    TOKEN_DAMAGE[damage](out / "data")
    zoo_ok(run_args(data, out, "--resume"))
    assert numbers(out) == reference
    assert sorted(cache) == CACHE_FILES
    assert snapshot(out / "data") == cache  # rebuilt as it was, no temp left


def test_a_token_cache_that_is_a_directory_is_refused(copy):
    """A folder in the cache's place is the user's: named, not replaced (was a traceback)."""
    data, out = copy
    (out / "data" / "tokens.bin").unlink()
    (out / "data" / "tokens.bin").mkdir()
    (out / "data" / "tokens.bin" / "mine.txt").write_text("keep")
    before = snapshot(out)
    zoo_fails(run_args(data, out, "--resume"), f"{out / 'data' / 'tokens.bin'}: Is a directory")
    assert snapshot(out) == before  # and no temp file left


# ---------------------------------------------------------------- --steps below the checkpoint


@pytest.mark.parametrize(
    "option, words",
    [
        (["--steps", "1"], "--steps 1 is below step 2 of the checkpoint in"),
        (["--stop-at", "1"], "--stop-at 1 is below step 2 of the checkpoint in"),
    ],
)
def test_resume_below_the_checkpoint_step_is_refused(copy, option, words):
    """It exited 0 having trained nothing, and --steps rewrote model.safetensors."""
    data, out = copy
    args = run_args(data, out, "--resume")
    if option[0] == "--steps":
        args[args.index("--steps") + 1] = option[1]
    else:
        args += option
    before = snapshot(out)
    zoo_fails(args, words, str(out))
    assert snapshot(out) == before
    assert not (out / "model.safetensors").exists()


# ---------------------------------------------------------------- temp files after refusals


REFUSED_DATA = {
    "not-utf8.txt": b"good text\n\xff\xfe bad\n",
    "bad-line.jsonl": b'{"text": "fine"}\n{"text": \n',
    "three-columns.tsv": b"a\tb\nc\td\te\n",
}


@pytest.mark.parametrize("name", sorted(REFUSED_DATA))
def test_refused_data_leaves_no_files_behind(name, tmp_path):
    """tokens.bin.PID.tmp (and for pairs, src.bin, tgt.bin and their offsets) stayed in
    OUT/data after the refusal."""
    data = tmp_path / name
    data.write_bytes(REFUSED_DATA[name] * 3)
    out = tmp_path / "run"
    args = run_args(data, out)
    args[args.index("gpt2")] = "transformer-base" if name.endswith(".tsv") else "gpt2"
    zoo_fails(args, name)
    assert not out.exists() or [p for p in out.rglob("*") if not p.is_dir()] == []
    assert sorted(p.name for p in tmp_path.iterdir()) == [name, *(["run"] if out.exists() else [])]


# ---------------------------------------------------------------- the replaced checkpoint


def test_a_resumed_run_does_not_keep_the_checkpoint_mapped(copy):
    """The optimizer state kept tensors memory-mapped from the checkpoint that was read; once
    the next save replaced it, the deleted file still held its disk space."""
    from archzoo.model.builder import build_model
    from archzoo.specs.spec import load_spec
    from archzoo.training.checkpoint import load_checkpoint, read_info
    from archzoo.training.config import TrainConfig
    from archzoo.training.optimizers import Optimizers, make_optimizers

    _, out = copy
    ckpt = out / "checkpoint.safetensors"
    step, info = read_info(ckpt)
    spec = load_spec(info["spec"])
    model = build_model(spec)
    opts = Optimizers(make_optimizers(model, TrainConfig(**info["config"]), spec), lambda e: 1.0)
    assert load_checkpoint(ckpt, model, opts) == step == 2
    maps = Path("/proc/self/maps").read_text()
    assert str(ckpt) not in maps, [line for line in maps.splitlines() if str(ckpt) in line]
    moments = [s["exp_avg"] for o in opts.optimizers for s in o.state.values()]
    assert len(moments) == len(list(model.parameters())) and any(m.abs().sum() > 0 for m in moments)
