"""Greedy decoding throughput: archzoo vs transformers.generate on GPT-2 small (random weights),
against a floor measured in the same run.

Run: python bench/generation.py [--new-tokens 128] [--repeats 3] [--batches 1,8,32] [--write]
Both libraries decode the same checkpoint in the same process; tokens are checked equal.
floor = the decoding step's weight matmuls alone at that batch and dtype (every block
projection and the LM head, F.linear on the model's own weights, nothing else): a step
cannot be faster than its matmuls, so archzoo's tok/s / floor tok/s is the share of the
step spent on the work that must be done. A bf16 row compares both libraries in bf16.
With --write the table is put in bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F
import transformers
from common import machine, median_time, paired_times, write_section

import archzoo

PROMPT_LEN = 16
TARGET = 0.85  # the issue's bound: archzoo's greedy tok/s >= 0.85 x the floor's


def matmul_floor(model: archzoo.ZooModel, batch: int, repeats: int = 5) -> float:
    """Seconds of one decoding step's weight matmuls at `batch` rows, on the model's weights."""
    linears = [m for m in model.decoder.modules() if isinstance(m, torch.nn.Linear)]
    head = model.head.proj.weight
    dtype = head.dtype
    inputs = {m.in_features: torch.randn(batch, m.in_features, dtype=dtype) for m in linears}
    x_head = torch.randn(batch, head.shape[1], dtype=dtype)

    def step() -> None:
        for m in linears:
            F.linear(inputs[m.in_features], m.weight, m.bias)
        F.linear(x_head, head)

    with torch.inference_mode():
        return min(median_time(step, repeats, warmup=2) for _ in range(3))


def measure(ref, ours, batch: int, n: int, repeats: int) -> dict[str, float]:
    """tok/s of both libraries (interleaved runs), the floor's, and whether tokens agree."""
    ids = torch.randint(0, 50257, (batch, PROMPT_LEN))
    kw = {"max_new_tokens": n, "min_new_tokens": n}

    def run_hf() -> torch.Tensor:
        mask = torch.ones_like(ids)
        return ref.generate(ids, attention_mask=mask, do_sample=False, pad_token_id=0, **kw)

    def run_ours() -> torch.Tensor:
        return ours.generate(ids, **kw)

    same = torch.equal(run_hf(), run_ours())
    times_hf, times_az = paired_times(run_hf, run_ours, repeats)
    floor = matmul_floor(ours, batch)
    return {
        "hf": batch * n / statistics.median(times_hf),
        "az": batch * n / statistics.median(times_az),
        "floor": batch / floor,
        "same": same,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--bf16-new-tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batches", default="1,8,32")
    parser.add_argument("--write", action="store_true", help="write the table to bench/RESULTS.md")
    args = parser.parse_args()
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        ref = transformers.GPT2LMHeadModel(transformers.GPT2Config()).eval()
        ref.save_pretrained(Path(tmp) / "gpt2")
        ours = archzoo.from_hf(Path(tmp) / "gpt2")
        rows = []
        for batch in (int(b) for b in args.batches.split(",")):
            rows.append((batch, "fp32", measure(ref, ours, batch, args.new_tokens, args.repeats)))
        ref16 = ref.to(torch.bfloat16)
        ours16 = archzoo.from_hf(Path(tmp) / "gpt2", dtype=torch.bfloat16)
        rows.append((1, "bf16", measure(ref16, ours16, 1, args.bf16_new_tokens, args.repeats)))
    lines = [
        f"`python bench/generation.py --repeats {args.repeats}`: GPT-2 small (124M, random "
        f"weights), greedy, prompt {PROMPT_LEN}, {args.new_tokens} new tokens "
        f"({args.bf16_new_tokens} in bf16), medians of {args.repeats} interleaved runs; "
        f"{machine()}, transformers {transformers.__version__}. floor = batch / the time of "
        "the step's weight matmuls alone (12 blocks' projections + LM head, F.linear on the "
        "model's weights, measured in the same run): no decoding step can be faster. "
        f"Target: archzoo >= {TARGET} x floor.",
        "",
        "| batch | dtype | transformers tok/s | archzoo tok/s | speed-up | floor tok/s | "
        "transformers / floor | archzoo / floor | target | same tokens |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---|:---:|",
    ]
    for batch, dtype, r in rows:
        share = r["az"] / r["floor"]
        lines.append(
            f"| {batch} | {dtype} | {r['hf']:.1f} | {r['az']:.1f} | {r['az'] / r['hf']:.2f}x | "
            f"{r['floor']:.1f} | {r['hf'] / r['floor']:.2f} | {share:.2f} | "
            f"{'met' if share >= TARGET else 'MISSED'} | {r['same']} |"
        )
    print("\n".join(lines))
    if args.write:
        write_section("Generation (bench/generation.py)", lines)


if __name__ == "__main__":
    main()
