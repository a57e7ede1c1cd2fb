"""Time importing a gpt2-sized checkpoint: archzoo.from_hf vs transformers.AutoModel.

Run: python bench/import_speed.py [--repeats 3]
Writes a random-weight GPT-2 small (124M) checkpoint to a temp dir, then loads it with both
libraries in the same process and prints median wall times.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import torch
import transformers
from common import median_time

import archzoo


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "gpt2"
        transformers.GPT2LMHeadModel(transformers.GPT2Config()).save_pretrained(directory)
        size = sum(f.stat().st_size for f in directory.iterdir()) / 2**20
        ids = torch.randint(0, 50257, (1, 16))
        loaders = {
            "archzoo.from_hf": lambda: archzoo.from_hf(directory),
            "transformers AutoModelForCausalLM": lambda: (
                transformers.AutoModelForCausalLM.from_pretrained(directory).eval()
            ),
            "transformers AutoModel": lambda: transformers.AutoModel.from_pretrained(
                directory
            ).eval(),
        }
        rows = []
        for name, load in loaders.items():
            load_only = median_time(load, args.repeats, warmup=0)
            with torch.no_grad():  # a first forward reads every weight, lazy or not
                first = median_time(lambda load=load: load()(ids), args.repeats, warmup=0)
            rows.append((name, load_only, first))
    print(
        f"gpt2 (124M params, {size:.0f} MiB safetensors), median of {args.repeats} runs, torch {torch.__version__}"
    )
    print(f"{'loader':36s} {'load s':>8s} {'load+forward s':>15s} {'ratio to archzoo':>17s}")
    base = rows[0][2]
    for name, load_only, first in rows:
        print(f"{name:36s} {load_only:8.3f} {first:15.3f} {first / base:16.2f}x")


if __name__ == "__main__":
    main()
