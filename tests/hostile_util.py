"""Helpers of the hostile-input suite: CLI runs that must fail cleanly, tiny checkpoints, limits."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import torch
from click.testing import CliRunner

from archzoo.cli.main import main
from archzoo.io.safe_write import write_safetensors

TINY = {"n_layers": 1, "d_model": 16, "n_heads": 2, "d_ff": 32, "vocab_size": 64, "max_len": 32}
TINY_SETS = [a for k, v in TINY.items() for a in ("--set", f"{k}={v}")]
MARKER_ENV = "ARCHZOO_HOSTILE_MARKER"  # hostile payloads try to create the file it names
TIME_LIMIT_S = 10.0  # for the command itself, measured after the imports
START_LIMIT_S = 90.0  # a hang never ends; interpreter start on a loaded 2-core box can be slow
MEMORY_LIMIT = 3 * 2**30  # address space of subprocess runs: enough for torch, not for a blow-up


def zoo_fails(args: list[str], *words: str, input: str | None = None) -> str:
    """Run `zoo ARGS` in-process; it must exit 2 with `Error:` naming every word, no traceback."""
    result = CliRunner().invoke(main, [str(a) for a in args], input=input)
    out = result.output
    assert result.exit_code == 2, (result.exit_code, out, result.exception)
    assert isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in out
    assert "Error" in out, out
    for word in words:
        assert word in out, (word, out)
    return out


def zoo_subprocess(args: list[str], *, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run `zoo ARGS` in a fresh interpreter under an address-space limit; the command itself
    (after the imports) must end within TIME_LIMIT_S."""
    code = (
        "import resource, sys, time\n"
        f"resource.setrlimit(resource.RLIMIT_AS, ({MEMORY_LIMIT}, {MEMORY_LIMIT}))\n"
        "from archzoo.cli.main import main\n"
        "import archzoo\n"
        "for name in archzoo.__all__:  # what `import archzoo` loaded before it became lazy\n"
        "    getattr(archzoo, name)\n"
        "start = time.monotonic()\n"
        "try:\n"
        "    main(sys.argv[1:], prog_name='zoo')\n"
        "finally:\n"
        "    print(f'elapsed {time.monotonic() - start:.3f}', file=sys.stderr)\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code, *[str(a) for a in args]],
        capture_output=True,
        text=True,
        timeout=START_LIMIT_S,
        env=env,
    )
    elapsed = float(run.stderr.rsplit("elapsed ", 1)[1])
    assert elapsed < TIME_LIMIT_S, (elapsed, run.stderr)
    return run


def assert_clean_failure(run: subprocess.CompletedProcess, *words: str) -> None:
    """A subprocess `zoo` run that exited 2 with an `Error:` line naming every word."""
    out = run.stdout + run.stderr
    assert run.returncode == 2, (run.returncode, out)
    assert "Traceback" not in out, out
    assert "Error:" in out, out
    for word in words:
        assert word in out, (word, out)


GPT2_SHAPES = {
    "wte.weight": (64, 16),
    "wpe.weight": (32, 16),
    "ln_f.weight": (16,),
    "ln_f.bias": (16,),
    "h.0.ln_1.weight": (16,),
    "h.0.ln_1.bias": (16,),
    "h.0.ln_2.weight": (16,),
    "h.0.ln_2.bias": (16,),
    "h.0.attn.c_attn.weight": (16, 48),
    "h.0.attn.c_attn.bias": (48,),
    "h.0.attn.c_proj.weight": (16, 16),
    "h.0.attn.c_proj.bias": (16,),
    "h.0.mlp.c_fc.weight": (16, 32),
    "h.0.mlp.c_fc.bias": (32,),
    "h.0.mlp.c_proj.weight": (32, 16),
    "h.0.mlp.c_proj.bias": (16,),
}
GPT2_CONFIG = {
    "model_type": "gpt2",
    "n_embd": 16,
    "n_layer": 1,
    "n_head": 2,
    "n_inner": 32,
    "vocab_size": 64,
    "n_positions": 32,
    "activation_function": "gelu_new",
}


def gpt2_tensors(seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {k: torch.randn(s, generator=g) for k, s in GPT2_SHAPES.items()}


def hf_gpt2(directory: Path, *, config: dict | None = None, shards: int = 1) -> Path:
    """A tiny GPT-2 checkpoint in the HF layout, written without transformers (or NumPy)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(config or GPT2_CONFIG))
    tensors = gpt2_tensors()
    if shards == 1:
        write_safetensors(directory / "model.safetensors", tensors, {"format": "pt"})
        return directory
    names = sorted(tensors)
    weight_map = {}
    for i in range(shards):
        part = {k: tensors[k] for k in names[i::shards]}
        fname = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        write_safetensors(directory / fname, part, {"format": "pt"})
        weight_map.update(dict.fromkeys(part, fname))
    index = {"metadata": {}, "weight_map": weight_map}
    (directory / "model.safetensors.index.json").write_text(json.dumps(index))
    return directory


def snapshot(directory: Path) -> dict[str, bytes]:
    """Every regular file's bytes under a directory, to show that nothing changed."""
    return {
        str(p.relative_to(directory)): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }
