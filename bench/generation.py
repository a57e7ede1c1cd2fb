"""Greedy decoding throughput: archzoo vs transformers.generate on GPT-2 small (random weights).

Run: python bench/generation.py [--new-tokens 128] [--repeats 3] [--write]
Both libraries decode the same checkpoint in the same process; tokens are checked equal.
With --write the table is added to bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import tempfile
import time
from pathlib import Path

import torch
import transformers

import archzoo

PROMPT_LEN = 16


def timed(fn, repeats: int) -> tuple[float, torch.Tensor]:
    fn()  # warm-up
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--write", action="store_true", help="append the table to bench/RESULTS.md")
    args = parser.parse_args()
    torch.manual_seed(0)
    n = args.new_tokens
    with tempfile.TemporaryDirectory() as tmp:
        ref = transformers.GPT2LMHeadModel(transformers.GPT2Config()).eval()
        ref.save_pretrained(Path(tmp) / "gpt2")
        ours = archzoo.from_hf(Path(tmp) / "gpt2")
    rows = []
    for batch in (1, 8):
        ids = torch.randint(0, 50257, (batch, PROMPT_LEN))
        kw = {"max_new_tokens": n, "min_new_tokens": n}

        def run_hf(ids: torch.Tensor = ids, kw: dict = kw) -> torch.Tensor:
            mask = torch.ones_like(ids)
            return ref.generate(ids, attention_mask=mask, do_sample=False, pad_token_id=0, **kw)

        def run_ours(ids: torch.Tensor = ids, kw: dict = kw) -> torch.Tensor:
            return ours.generate(ids, **kw)

        t_hf, out_hf = timed(run_hf, args.repeats)
        t_az, out_az = timed(run_ours, args.repeats)
        same = torch.equal(out_hf, out_az)
        rows.append((batch, batch * n / t_hf, batch * n / t_az, same))
    lines = [
        f"GPT-2 small (124M, random weights), greedy, prompt {PROMPT_LEN}, {n} new tokens, "
        f"median of {args.repeats}; torch {torch.__version__}, transformers {transformers.__version__}, "
        f"{torch.get_num_threads()} threads, {platform.processor() or platform.machine()}",
        "",
        "| batch | transformers tok/s | archzoo tok/s | speed-up | same tokens |",
        "|---:|---:|---:|---:|:---:|",
    ]
    for batch, hf_tps, az_tps, same in rows:
        lines.append(f"| {batch} | {hf_tps:.1f} | {az_tps:.1f} | {az_tps / hf_tps:.2f}x | {same} |")
    print("\n".join(lines))
    if args.write:
        path = Path(__file__).with_name("RESULTS.md")
        with path.open("a", encoding="utf-8") as f:
            f.write("\n## Generation (bench/generation.py)\n\n" + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
