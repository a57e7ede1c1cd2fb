"""`zoo compare`: same data order and seeds for every spec, matched sizes, table, JSON and plot."""

from __future__ import annotations

import json
import random
import statistics
import sys
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from hostile_util import zoo_fails

import archzoo
from archzoo.cli.main import main
from archzoo.parts.costs import model_costs
from archzoo.specs.spec import parse_override
from archzoo.training.compare import match_spec

SETS = [
    "n_layers=1",
    "d_model=16",
    "n_heads=2",
    "d_ff=32",
    "vocab_size=260",
    "max_len=32",
    "dropout=0.0",
]
OVERRIDES = dict(parse_override(s) for s in SETS)
WORDS = "one two three four five six seven eight nine ten".split()


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def spec_file(tmp_path: Path, name: str, position: str) -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"name: {name}\nextends: gpt2\nposition: {position}\n")
    return str(path)


def corpus(tmp_path: Path) -> str:
    rng = random.Random(0)
    path = tmp_path / "c.txt"
    path.write_text("\n".join(" ".join(rng.choice(WORDS) for _ in range(8)) for _ in range(300)))
    return str(path)


def run(tmp_path: Path, specs: list[str], *extra: str):
    args = ["compare", *specs, "--data", corpus(tmp_path), "--out", str(tmp_path / "cmp")]
    args += ["--steps", "4", "--batch", "4", "--seq-len", "16", "--eval-every", "2"]
    args += ["--eval-examples", "4", "--lr", "3e-3", "--warmup", "1", "--no-progress"]
    for s in SETS:
        args += ["--set", s]
    return CliRunner().invoke(main, [*args, *extra])


def test_compare_three_specs_writes_table_results_and_plot(tmp_path):
    learned = spec_file(tmp_path, "learned", "learned")
    rotary = spec_file(tmp_path, "rotary", "rotary")
    r = run(tmp_path, [learned, rotary, learned], "--seeds", "2", "--match", "params")
    assert r.exit_code == 0, r.output
    report = json.loads((tmp_path / "cmp/results.json").read_text())
    labels = [s["label"] for s in report["specs"]]
    assert labels == ["learned-0", "rotary", "learned-2"]
    for label in labels:
        assert label in r.output
    first, second, third = report["specs"]
    # the same spec twice: the same seeds and data order give exactly the same curves
    for a, b in zip(first["runs"], third["runs"], strict=True):
        assert a["loss"] == b["loss"] and a["eval_loss"] == b["eval_loss"]
    assert first["runs"][0]["loss"] != first["runs"][1]["loss"]  # seeds differ
    # rotary has no position table: d_ff grew until params match within 2%
    assert second["matched"]["d_ff"] > 32
    assert abs(second["params"] - first["params"]) <= 0.02 * first["params"]
    # the table's spread is the standard deviation of the per-seed final eval losses
    finals = [run["eval_loss"][-1] for run in second["runs"]]
    assert second["final_eval_loss"]["mean"] == pytest.approx(statistics.fmean(finals))
    assert second["final_eval_loss"]["std"] == pytest.approx(statistics.stdev(finals))
    row = next(line for line in r.output.splitlines() if line.startswith("rotary"))
    mean, std = second["final_eval_loss"]["mean"], second["final_eval_loss"]["std"]
    assert f"{mean:.4f} ± {std:.4f}" in row
    model = archzoo.build_model(learned, OVERRIDES, device="meta")
    assert first["flops_per_token"] == 3 * model_costs(model, 16)["flops_per_token"]
    png = (tmp_path / "cmp/loss.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) < 200_000


def test_match_flops_and_n_layers(tmp_path):
    base = OVERRIDES
    target_model = archzoo.build_model("gpt2", {**base, "n_layers": 3, "d_ff": 64}, device="meta")
    target = model_costs(target_model, 16)["flops_per_token"]
    spec, applied = match_spec("gpt2", base, target, "flops", "d_ff", 16)
    got = model_costs(archzoo.build_model(spec, device="meta"), 16)["flops_per_token"]
    assert applied["d_ff"] > 32 and abs(got - target) <= 0.02 * target
    params = archzoo.build_model("gpt2", {**base, "n_layers": 3}, device="meta").num_parameters()
    spec, applied = match_spec("gpt2", base, params, "params", "n_layers", 16)
    assert applied == {"n_layers": 3} and spec.data["n_layers"] == 3
    with pytest.raises(
        ValueError,
        match=r"cannot match 'gpt2' to 21,200 params within 2% by n_layers: the closest, n_layers=\d+",
    ):
        match_spec("gpt2", base, 21_200, "params", "n_layers", 16)


def test_missing_matplotlib_is_a_clear_error_before_training(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    r = run(tmp_path, ["gpt2"])
    assert r.exit_code == 2
    assert r.output.startswith("Error: ") and "pip install 'archzoo[plot]'" in r.output
    assert not (tmp_path / "cmp").exists()


@pytest.mark.parametrize("name", ["../../escaped", "{tmp}/absolute", "..", "''"])
def test_a_spec_name_that_leaves_the_out_directory_is_refused_before_training(tmp_path, name):
    """Runs went to --out/runs/NAME/seedN: such names put them outside --out."""
    spec = tmp_path / "s.yaml"
    spec.write_text(f"name: {name.format(tmp=tmp_path)}\nextends: gpt2\n")
    (tmp_path / "deep" / "er").mkdir(parents=True)
    args = ["compare", spec, "--data", corpus(tmp_path), "--out", tmp_path / "deep" / "er" / "c"]
    args += ["--steps", "1", "--seq-len", "16", "--no-progress", "--no-plot"]
    zoo_fails([*args, *(a for s in SETS for a in ("--set", s))], "cannot name a run directory")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.txt", "deep", "s.yaml"]
    assert not (tmp_path / "deep" / "er" / "c").exists()


def test_a_warm_up_directory_of_the_user_in_out_is_kept(tmp_path):
    """The throwaway warm-up run used --out/warm-up and deleted it afterwards, whoever made it."""
    mine = tmp_path / "cmp" / "warm-up"
    mine.mkdir(parents=True)
    (mine / "notes.txt").write_text("precious")
    r = run(tmp_path, ["gpt2"], "--no-plot", "--steps", "1")
    assert r.exit_code == 0, r.output
    assert (mine / "notes.txt").read_text() == "precious"
    assert sorted(p.name for p in (tmp_path / "cmp").iterdir()) == [
        "data",
        "results.json",
        "runs",
        "warm-up",
    ]


def test_refused_data_leaves_no_out_directory(tmp_path):
    (tmp_path / "empty.txt").write_text("")
    args = ["compare", "gpt2", "--data", tmp_path / "empty.txt", "--out", tmp_path / "cmp"]
    zoo_fails([*args, "--no-plot", *(a for s in SETS for a in ("--set", s))], "file is empty")
    assert not (tmp_path / "cmp").exists()
