"""Progress says what it is doing, on stderr only: `zoo compare` names each run's bar (spec,
seed, i/N); import, export and tokenisation show bars; `--json` stdout stays one JSON object."""

from __future__ import annotations

import json
import random
import re

import pytest
import torch
from click.testing import CliRunner
from tqdm import tqdm

import archzoo
from archzoo.cli.main import main

SETS = ["n_layers=1", "d_model=16", "n_heads=2", "d_ff=32", "vocab_size=260", "max_len=32"]


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def invoke(*args, env: dict[str, str] | None = None):
    result = CliRunner().invoke(main, [str(a) for a in args], env=env)
    assert result.exit_code == 0, (result.output, result.exception)
    return result


def corpus(tmp_path) -> str:
    rng = random.Random(0)
    words = "one two three four five six seven eight".split()
    path = tmp_path / "c.txt"
    path.write_text("\n".join(" ".join(rng.choice(words) for _ in range(8)) for _ in range(200)))
    return str(path)


def test_compare_names_each_runs_bar_with_spec_seed_and_position(tmp_path):
    args = ["compare", "gpt2", "gpt2", "--data", corpus(tmp_path), "--out", tmp_path / "cmp"]
    args += ["--steps", "2", "--batch", "2", "--seq-len", "8", "--eval-every", "2"]
    args += ["--eval-examples", "2", "--seeds", "2", "--no-plot"]
    for s in SETS:
        args += ["--set", s]
    result = invoke(*args, env={"ARCHZOO_PROGRESS": "1"})
    labels = ["gpt2-0 seed 0 (1/4)", "gpt2-0 seed 1 (2/4)", "gpt2-1 seed 0 (3/4)"]
    labels.append("gpt2-1 seed 1 (4/4)")
    named = [label for label in labels if label + ":" in result.stderr]
    assert named == labels  # every bar names its run: tqdm writes "LABEL: 100%|..."
    assert "tokenising c.txt:" in result.stderr  # the corpus is tokenised once, with a bar
    assert not any(label in result.stdout for label in labels)  # never on stdout
    assert "gpt2-0" in result.stdout and "FINAL EVAL" in result.stdout  # the table is


def hf_gpt2(tmp_path):
    hf = pytest.importorskip("transformers")
    cfg = hf.GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=64, n_positions=32)
    directory = tmp_path / "hf-gpt2"
    hf.GPT2LMHeadModel(cfg).save_pretrained(directory)
    return directory


def test_import_and_export_show_progress_on_stderr_and_json_stays_clean(tmp_path):
    directory = hf_gpt2(tmp_path)
    shown = {"ARCHZOO_PROGRESS": "1"}
    result = invoke("import", directory, "--json", env=shown)
    assert f"import {directory.name}: reading tensors:" in result.stderr
    assert re.search(r"100%\|.*\| (\d+)/\1 ", result.stderr)  # every tensor read
    report = json.loads(result.stdout)  # stdout is the JSON object alone
    assert report["params"] == archzoo.from_hf(directory).num_parameters()
    out = tmp_path / "exported"
    result = invoke("export", directory, "--hf", out, "--json", env=shown)
    assert "export exported: writing tensors:" in result.stderr
    assert json.loads(result.stdout)["directory"] == str(out)
    quiet = invoke("import", directory, "--json")  # not a terminal, not asked for: no bar
    assert "reading tensors" not in quiet.stderr
    json.loads(quiet.stdout)


def test_tokenising_shows_the_bytes_read(tmp_path):
    data = corpus(tmp_path)
    args = ["train", "gpt2", "--data", data, "--out", tmp_path / "run", "--steps", "1"]
    args += ["--batch", "2", "--seq-len", "8", "--eval-examples", "1", "--no-progress"]
    for s in SETS:
        args += ["--set", s]
    result = invoke(*args, env={"ARCHZOO_PROGRESS": "1"})
    size = (tmp_path / "c.txt").stat().st_size
    bar = re.search(r"tokenising c\.txt: 100%\|[^|]*\| (\S+)/(\S+) ", result.stderr)
    assert bar is not None, result.stderr
    assert bar[1] == bar[2] == tqdm.format_sizeof(size)  # every byte of the file, in bytes
    assert "tokenising c.txt" not in result.stdout
