"""CI: a plain `pip install archzoo` (no extras, so no NumPy) saves, loads and imports."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

import archzoo
from archzoo.io.safe_write import write_safetensors

TINY = ["n_layers=1", "d_model=16", "n_heads=2", "d_ff=32", "vocab_size=64", "max_len=32"]


def zoo(*args: str) -> str:
    """Run the installed `zoo` command; fail loudly with its output."""
    run = subprocess.run(
        [sys.executable, "-m", "archzoo.cli", *args], capture_output=True, text=True
    )
    if run.returncode != 0:
        sys.exit(f"zoo {' '.join(args)} failed ({run.returncode}):\n{run.stdout}{run.stderr}")
    return run.stdout


def hf_gpt2(directory: Path) -> dict[str, torch.Tensor]:
    """A tiny GPT-2 checkpoint in the Hugging Face layout (config.json + model.safetensors)."""
    d, ff, vocab, n_pos = 16, 32, 64, 32
    config = {"model_type": "gpt2", "n_embd": d, "n_layer": 1, "n_head": 2, "n_inner": ff}
    config |= {"vocab_size": vocab, "n_positions": n_pos, "activation_function": "gelu_new"}
    (directory / "config.json").write_text(json.dumps(config))
    g = torch.Generator().manual_seed(0)
    shapes = {
        "wte.weight": (vocab, d),
        "wpe.weight": (n_pos, d),
        "ln_f.weight": (d,),
        "ln_f.bias": (d,),
        "h.0.ln_1.weight": (d,),
        "h.0.ln_1.bias": (d,),
        "h.0.ln_2.weight": (d,),
        "h.0.ln_2.bias": (d,),
        "h.0.attn.c_attn.weight": (d, 3 * d),
        "h.0.attn.c_attn.bias": (3 * d,),
        "h.0.attn.c_proj.weight": (d, d),
        "h.0.attn.c_proj.bias": (d,),
        "h.0.mlp.c_fc.weight": (d, ff),
        "h.0.mlp.c_fc.bias": (ff,),
        "h.0.mlp.c_proj.weight": (ff, d),
        "h.0.mlp.c_proj.bias": (d,),
    }
    tensors = {k: torch.randn(s, generator=g) for k, s in shapes.items()}
    write_safetensors(directory / "model.safetensors", tensors, {"format": "pt"})
    return tensors


def main() -> None:
    if importlib.util.find_spec("numpy") is not None:
        sys.exit("NumPy is installed: this check must run in a venv without extras")
    ids = torch.tensor([[1, 5, 9, 2]])
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        built = work / "gpt2-tiny.safetensors"
        zoo("build", "gpt2", *[a for kv in TINY for a in ("--set", kv)], "--out", str(built))
        model = archzoo.load(built)
        archzoo.save(model, work / "again.safetensors")
        again = archzoo.load(work / "again.safetensors")
        with torch.no_grad():
            assert torch.equal(model(ids).logits, again(ids).logits), "save/load changed logits"

        hf = work / "hf"
        hf.mkdir()
        tensors = hf_gpt2(hf)
        imported = work / "imported.safetensors"
        zoo("import", str(hf), "--out", str(imported))
        direct, loaded = archzoo.from_hf(hf), archzoo.load(imported)
        word = loaded.state_dict()["decoder.embedding.word.weight"]
        assert torch.equal(word, tensors["wte.weight"]), "imported token table differs"
        with torch.no_grad():  # a headless GPT2Model layout (no lm_head): hidden states
            a, b = direct(ids).last_hidden_state, loaded(ids).last_hidden_state
            assert torch.equal(a, b), "import/save/load differs"
    print(
        "plain install: zoo build --out, archzoo.load/save and zoo import --out work without NumPy"
    )


if __name__ == "__main__":
    main()
