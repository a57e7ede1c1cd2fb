"""The README's first run works as written: every shell command of its "First run" section
runs here, in order, with fewer training steps (issue 30, item 4). `zoo` commands run
in-process through the console script's entry point; the others through the shell."""

from __future__ import annotations

import ast
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import archzoo
from archzoo.cli.main import main

ROOT = Path(__file__).resolve().parents[1]

# the only changes made to the README's commands: a shorter run (each must apply)
TINY = {
    r"--steps \d+": "--steps 2",
    r"--batch \d+": "--batch 4",
    r"--warmup \d+": "--warmup 1",
    r"--max-new-tokens \d+": "--max-new-tokens 5",
}


def section_commands(heading: str, doc: str = "README.md") -> list[str]:
    """The shell commands of the first ```bash block after `heading` in `doc`, continuations
    joined."""
    text = (ROOT / doc).read_text(encoding="utf-8")
    start = text.index(f"\n{heading}\n")
    block = re.search(r"```bash\n(.*?)```", text[start:], re.S).group(1)
    joined = block.replace("\\\n", " ")
    return [line.strip() for line in joined.splitlines() if line.strip()]


def shrink(command: str, used: set[str]) -> str:
    for pattern, tiny in TINY.items():
        command, n = re.subn(pattern, tiny, command)
        if n:
            used.add(pattern)
    return command


def test_every_first_run_command_works(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    commands = section_commands("### First run")
    assert [c.split()[:2] for c in commands] == [
        ["zoo", "build"],
        ["python", "-c"],
        ["zoo", "train"],
        ["zoo", "generate"],
        ["zoo", "attn"],
        ["zoo", "export"],
        ["python", "-c"],
    ]
    used: set[str] = set()
    outputs = []
    for command in commands:
        command = shrink(command, used)
        if command.startswith("zoo "):
            result = CliRunner().invoke(main, shlex.split(command)[1:])
            assert result.exit_code == 0, (command, result.output, result.exception)
            outputs.append(result.output)
        else:
            done = subprocess.run(command, shell=True, env=env, capture_output=True, text=True)
            assert done.returncode == 0, (command, done.stderr)
            outputs.append(done.stdout)
    assert used == set(TINY), f"the README's commands no longer take {set(TINY) - used}"

    build, _, trained, generated, attn, exported, loaded = outputs
    assert build.splitlines()[1] == "parameters: 124,439,808 (124.4M)"
    assert (tmp_path / "corpus.txt").stat().st_size > 50_000  # argparse's source
    run = tmp_path / "runs" / "first"
    assert {"model.safetensors", "spec.yaml", "tokenizer.json"} <= {p.name for p in run.iterdir()}
    assert re.search(r"step 2: loss \d+\.\d{4}, eval loss ", trained)
    assert "wrote runs/first: model.safetensors, spec.yaml, tokenizer.json" in trained
    assert generated.startswith("def parse") and len(generated) > len("def parse\n")
    assert attn == "wrote attention.html (2 layers x 4 heads, 21 tokens)\n"
    assert (tmp_path / "attention.html").stat().st_size > 1000
    assert exported.startswith("wrote runs/first-hf: gpt2 (GPT2LMHeadModel)\n")
    model = archzoo.load(run)
    assert ast.literal_eval(loaded.strip()) == model.summary()
    assert model.spec.data["d_model"] == 64 and model.spec.data["vocab_size"] == 260


def test_the_hybrid_recipe_commands_work(tmp_path, monkeypatch):
    """The README's hybrid recipe, with 2 steps: `zoo train` on the hybrid spec, then `zoo
    compare` with its attention-only sibling at matched parameters."""
    import argparse
    import inspect

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    (tmp_path / "corpus.txt").write_text(inspect.getsource(argparse), encoding="utf-8")
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    commands = section_commands("### A hybrid stack against its attention-only sibling")
    assert [c.split()[:2] for c in commands] == [["zoo", "train"], ["zoo", "compare"]]
    outputs = []
    for command in commands:
        command, n = re.subn(r"--steps \d+", "--steps 2", command)
        assert n == 1
        result = CliRunner().invoke(main, shlex.split(command)[1:])
        assert result.exit_code == 0, (command, result.output, result.exception)
        outputs.append(result.output)
    trained, compared = outputs
    assert "wrote runs/hybrid: model.safetensors, spec.yaml, tokenizer.json" in trained
    kinds = [b.attention.name for b in archzoo.load(tmp_path / "runs" / "hybrid").decoder.blocks]
    assert kinds == ["gated_deltanet", "mha"]
    assert re.search(r"^char-rotary +116,736 ", compared, re.M)  # matched within 2%
    assert re.search(r"^char-hybrid \(d_ff=236\) +116,720 ", compared, re.M)


def test_the_training_section_example_is_a_valid_spec():
    """Its `zoo train gpt2 --set ...` line once asked for d_model 256 with GPT-2's 12 heads."""
    (command, *_) = section_commands("## Training from files (`zoo train`)", "docs/training.md")
    args = shlex.split(command)
    assert args[:3] == ["zoo", "train", "gpt2"]
    sets = dict(a.split("=", 1) for a, flag in zip(args[1:], args, strict=False) if flag == "--set")
    spec = archzoo.load_spec("gpt2", {k: int(v) for k, v in sets.items()})
    assert (spec.data["d_model"], spec.data["n_heads"], spec.data["head_dim"]) == (256, 4, 64)


@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_help_answers_to_h_everywhere(flag):
    top = CliRunner().invoke(main, [flag], prog_name="zoo")
    assert top.exit_code == 0 and top.output.startswith("Usage: zoo [OPTIONS] COMMAND")
    for command in ("generate", "train", "list", "show"):
        result = CliRunner().invoke(main, [command, flag], prog_name="zoo")
        assert result.exit_code == 0 and result.output.startswith(f"Usage: zoo {command} ")


def test_show_lists_only_the_capabilities_of_the_components_kind():
    def last_line(name: str) -> str:
        result = CliRunner().invoke(main, ["show", name])
        assert result.exit_code == 0, result.output
        return result.output.splitlines()[-1]

    assert last_line("norm:rmsnorm") == "capabilities: none"  # listed causal, bidirectional...
    assert last_line("position:rotary") == "capabilities: rotate, even_head_dim"
    assert last_line("ffn:moe") == "capabilities: aux_loss"
    assert last_line("attention:mha") == (
        "capabilities: causal, bidirectional, cross, accepts_rotate, accepts_bias, kv_cache, mup"
    )
