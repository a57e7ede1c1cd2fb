"""Peak memory of exporting a 1B-class model to the HF layout: `zoo export` vs transformers.

Run: python bench/export_memory.py [--model llama3.2-1b] [--dtype bfloat16] [--write]

A random-weight model of the zoo spec is saved as an archzoo file. Then, each in a fresh
process whose resident memory (anonymous and file-backed: memory-mapped weights count once
touched) is sampled every 2 ms, reported as the peak growth over the process before the
call and as a multiple of the weights' bytes:
- archzoo, what `zoo export FILE --hf DIR` runs: load the file, to_hf with release=True
  (write streamed, free the weights, transformers loads the export and runs the probe);
- archzoo's to_hf keeping the model (the Python API's default, for comparison);
- transformers on the same weights: from_pretrained of the export, then save_pretrained.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
import transformers
from common import machine, write_section
from import_speed import sampled_peak

import archzoo

TARGET = 1.5  # the bound: peak export memory below 1.5 x the weights


def run_one(case: str, source: str, out: str) -> dict[str, float]:
    """One case in this fresh process: its peak RSS growth and wall time."""

    def archzoo_export(release: bool) -> None:
        model = archzoo.load(source)
        archzoo.to_hf(model, out, release=release)

    def transformers_round() -> None:
        model = transformers.AutoModelForCausalLM.from_pretrained(source, dtype="auto")
        model.save_pretrained(out)

    cases = {
        "archzoo zoo export (release)": lambda: archzoo_export(True),
        "archzoo to_hf (model kept)": lambda: archzoo_export(False),
        "transformers from_pretrained + save_pretrained": transformers_round,
    }
    start = time.perf_counter()
    _, peak = sampled_peak(cases[case])
    return {"peak": peak, "seconds": time.perf_counter() - start}


def table(model_name: str, dtype: torch.dtype) -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        file = Path(tmp) / "model.safetensors"
        torch.manual_seed(0)
        model = archzoo.build_model(model_name, dtype=dtype)
        params = model.num_parameters()
        archzoo.save(model, file)
        del model
        weights = file.stat().st_size
        rows = []
        cases = [
            ("archzoo zoo export (release)", file),
            ("archzoo to_hf (model kept)", file),
            ("transformers from_pretrained + save_pretrained", Path(tmp) / "exported"),
        ]
        for i, (case, source) in enumerate(cases):
            out = Path(tmp) / ("exported" if i == 0 else f"out{i}")
            cmd = [sys.executable, __file__, "--one", case, str(source), str(out)]
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode != 0:
                raise SystemExit(f"{case} failed:\n{done.stderr[-3000:]}")
            rows.append((case, json.loads(done.stdout.strip().splitlines()[-1])))
    lines = [
        f"`python bench/export_memory.py --model {model_name} --dtype {str(dtype)[6:]}`: "
        f"random-weight {model_name} ({params / 1e9:.2f}B parameters, "
        f"{weights / 2**30:.2f} GiB {str(dtype)[6:]} weights), exported to the HF layout; "
        "each case in a fresh process, resident memory (anonymous + file-backed) sampled "
        f"every 2 ms, growth over the process before the call. {machine()}, transformers "
        f"{transformers.__version__}.",
        "",
        f"| case | s | peak MiB | x weights | target < {TARGET}x |",
        "|---|---:|---:|---:|---|",
    ]
    for case, r in rows:
        ratio = r["peak"] / weights
        verdict = ("met" if ratio < TARGET else "MISSED") if "release" in case else "-"
        lines.append(
            f"| {case} | {r['seconds']:.1f} | {r['peak'] / 2**20:.0f} | {ratio:.2f} | {verdict} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="llama3.2-1b")
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    parser.add_argument("--write", action="store_true", help="write the table to RESULTS.md")
    parser.add_argument("--one", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_one(*args.one)))
        return
    lines = table(args.model, getattr(torch, args.dtype))
    print("\n".join(lines))
    if args.write:
        write_section("Export memory (bench/export_memory.py)", lines)


if __name__ == "__main__":
    main()
