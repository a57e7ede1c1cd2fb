"""Importing checkpoints: archzoo.from_hf / archzoo.load vs transformers, time and peak memory.

Run: python bench/import_speed.py [--repeats 3] [--only speed,memory] [--write]

speed: a random-weight GPT-2 small (124M) checkpoint loaded by both libraries in the same
process, median wall times. memory: a random-weight GPT-2-shaped checkpoint (d_model 1024,
16 layers, 253M parameters, ~1 GB fp32 safetensors) plus archzoo's own file of the same
weights, each loaded in a fresh process whose resident memory (anonymous and file-backed:
weights read from a memory map count once touched) is sampled every 2 ms; reported is the
peak growth over the process before the call, right after loading and through a first
forward pass (which reads every weight), as a multiple of the file size.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import torch
import transformers
from common import machine, median_time, write_section

import archzoo

TARGET = 1.2  # the bound: peak import memory <= 1.2 x the file size
BIG = {"n_embd": 1024, "n_layer": 16, "n_head": 16, "n_positions": 1024}
# BERT's converter fuses q, k and v: a source that is transformed, not mapped as it is
BIG_BERT = {"hidden_size": 1024, "num_hidden_layers": 16, "num_attention_heads": 16}


def speed_table(repeats: int) -> None:
    """Median load and load + first-forward times of a GPT-2 small checkpoint."""
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
            load_only = median_time(load, repeats, warmup=0)
            with torch.no_grad():  # a first forward reads every weight, lazy or not
                first = median_time(lambda load=load: load()(ids), repeats, warmup=0)
            rows.append((name, load_only, first))
    print(
        f"gpt2 (124M params, {size:.0f} MiB safetensors), median of {repeats} runs, "
        f"torch {torch.__version__}"
    )
    print(f"{'loader':36s} {'load s':>8s} {'load+forward s':>15s} {'ratio to archzoo':>17s}")
    base = rows[0][2]
    for name, load_only, first in rows:
        print(f"{name:36s} {load_only:8.3f} {first:15.3f} {first / base:16.2f}x")


def rss() -> int:
    """Resident memory of this process in bytes (anonymous and file-backed)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def sampled_peak(fn: Callable[[], object], interval: float = 0.002) -> tuple[object, int]:
    """fn's result and the peak RSS growth while it ran (a thread samples every 2 ms)."""
    base = peak = rss()
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, rss())
            time.sleep(interval)

    watcher = threading.Thread(target=sample, daemon=True)
    watcher.start()
    try:
        result = fn()
    finally:
        done.set()
        watcher.join()
    return result, max(peak, rss()) - base


def memory_one(case: str, path: str) -> dict[str, float]:
    """Load `path` with `case` in this fresh process; peak growth after load and forward."""
    loaders = {
        "archzoo.from_hf": lambda: archzoo.from_hf(path),
        "archzoo.load": lambda: archzoo.load(path),
        "transformers from_pretrained": lambda: auto.from_pretrained(path).eval(),
    }
    bert = "bert" in Path(path).name
    auto = transformers.AutoModelForMaskedLM if bert else transformers.AutoModelForCausalLM
    ids = torch.randint(0, 30522 if bert else 50257, (1, 8))
    start = time.perf_counter()
    model, load_peak = sampled_peak(loaders[case])
    seconds = time.perf_counter() - start

    def forward() -> None:
        with torch.no_grad():
            model(ids)

    _, forward_peak = sampled_peak(forward)  # measured from after the load: add the two
    return {"load": load_peak, "forward": load_peak + forward_peak, "seconds": seconds}


def memory_table() -> list[str]:
    """Peak resident memory of importing a ~1 GB checkpoint, each loader in a fresh process."""
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        hf_dir, az_file = Path(tmp) / "gpt2", Path(tmp) / "gpt2.safetensors"
        transformers.GPT2LMHeadModel(transformers.GPT2Config(**BIG)).save_pretrained(hf_dir)
        archzoo.save(archzoo.from_hf(hf_dir), az_file)
        bert_dir = Path(tmp) / "bert"
        bert = transformers.BertForMaskedLM(transformers.BertConfig(**BIG_BERT))
        bert.save_pretrained(bert_dir)
        del bert
        cases = {
            "gpt2: transformers from_pretrained": hf_dir,
            "gpt2: archzoo.from_hf": hf_dir,
            "gpt2: archzoo.load": az_file,
            "bert: transformers from_pretrained": bert_dir,
            "bert: archzoo.from_hf": bert_dir,
        }
        results, sizes = {}, {}
        for case, path in cases.items():
            loader = case.split(": ")[1]
            cmd = [sys.executable, __file__, "--memory-one", loader, str(path)]
            out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
            results[case] = json.loads(out.strip().splitlines()[-1])
            sizes[case] = (path if path.is_file() else path / "model.safetensors").stat().st_size
    lines = [
        f"`python bench/import_speed.py --only memory`: random-weight GPT-2-shaped ({BIG}, "
        f"{sizes['gpt2: archzoo.from_hf'] / 2**20:.0f} MiB fp32 safetensors) and BERT-shaped "
        f"({BIG_BERT}, {sizes['bert: archzoo.from_hf'] / 2**20:.0f} MiB) checkpoints; "
        "each case in a fresh process, "
        "resident memory (anonymous + file-backed) sampled every 2 ms, growth over the "
        f"process before the call. {machine()}, transformers {transformers.__version__}.",
        "",
        "| loader | load s | peak after load MiB | x file | peak through a forward MiB | "
        f"x file | target <= {TARGET}x |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for case, r in results.items():
        size = sizes[case]
        ok = r["forward"] / size <= TARGET
        lines.append(
            f"| {case} | {r['seconds']:.2f} | {r['load'] / 2**20:.0f} | {r['load'] / size:.2f} "
            f"| {r['forward'] / 2**20:.0f} | {r['forward'] / size:.2f} | "
            f"{'met' if ok else 'MISSED'} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", default="speed,memory", help="speed, memory or both")
    parser.add_argument("--write", action="store_true", help="write the memory table to RESULTS.md")
    parser.add_argument("--memory-one", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_one:
        print(json.dumps(memory_one(*args.memory_one)))
        return
    torch.manual_seed(0)
    chosen = set(args.only.split(","))
    if "speed" in chosen:
        speed_table(args.repeats)
    if "memory" in chosen:
        lines = memory_table()
        print("\n".join(lines))
        if args.write:
            write_section("Import memory (bench/import_speed.py)", lines)


if __name__ == "__main__":
    main()
