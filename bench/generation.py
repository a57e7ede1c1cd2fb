"""Greedy decoding throughput: archzoo vs transformers.generate on GPT-2 small (random weights),
against a floor measured in the same run.

Run: python bench/generation.py [--new-tokens 128] [--repeats 3] [--batches 1,8,32] [--write]
Both libraries decode the same checkpoint in the same process; tokens are checked equal.
The timed call is the whole `generate(n new tokens)`: one prefill of the prompt (batch x 16
rows through every block, the LM head on the last position only, as both libraries do)
that yields the first token, then n - 1 decoding steps of one row per sequence. Its floor
is the weight matmuls of exactly that work, F.linear on the model's own weights at those
row counts and dtype, nothing else: prefill matmuls + (n - 1) x one step's matmuls. No
implementation can be faster, so tok/s / floor tok/s is the share of the call spent on work
that must be done. A bf16 row compares both libraries in bf16.
With --write the table is put in bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
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


def matmul_floor(model: archzoo.ZooModel, rows: int, head_rows: int, repeats: int = 5) -> float:
    """Seconds of one forward's weight matmuls: `rows` token rows through every block
    projection and `head_rows` through the LM head, on the model's weights."""
    linears = [m for m in model.decoder.modules() if isinstance(m, torch.nn.Linear)]
    head = model.head.proj.weight
    dtype = head.dtype
    inputs = {m.in_features: torch.randn(rows, m.in_features, dtype=dtype) for m in linears}
    x_head = torch.randn(head_rows, head.shape[1], dtype=dtype)

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
    prefill = matmul_floor(ours, batch * PROMPT_LEN, batch, repeats=2)
    floor = prefill + (n - 1) * matmul_floor(ours, batch, batch)  # seconds of the whole call
    return {
        "hf": batch * n / statistics.median(times_hf),
        "az": batch * n / statistics.median(times_az),
        "floor": batch * n / floor,
        "prefill": prefill / floor,
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
    load = os.getloadavg()
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
        f"{machine()}, transformers {transformers.__version__}; load average (1 min) "
        f"{load[0]:.1f} at start, {os.getloadavg()[0]:.1f} at end. Every rate is new tokens / "
        "the whole `generate` call (prefill included). floor = the call's weight matmuls "
        f"alone, measured in the same run: the prefill's ({PROMPT_LEN} x batch rows through "
        "every block projection, the LM head on the last position) + (new tokens - 1) x a "
        "step's (batch rows through every projection and the LM head), F.linear on the "
        "model's weights; no implementation can be faster. prefill = the prefill's share of "
        f"that floor. Target: archzoo >= {TARGET} x floor.",
        "",
        "| batch | dtype | transformers tok/s | archzoo tok/s | speed-up | floor tok/s | "
        "prefill | transformers / floor | archzoo / floor | target | same tokens |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---|:---:|",
    ]
    for batch, dtype, r in rows:
        share = r["az"] / r["floor"]
        lines.append(
            f"| {batch} | {dtype} | {r['hf']:.1f} | {r['az']:.1f} | {r['az'] / r['hf']:.2f}x | "
            f"{r['floor']:.1f} | {r['prefill']:.0%} | {r['hf'] / r['floor']:.2f} | {share:.2f} | "
            f"{'met' if share >= TARGET else 'MISSED'} | {r['same']} |"
        )
    print("\n".join(lines))
    if args.write:
        write_section("Generation (bench/generation.py)", lines)


if __name__ == "__main__":
    main()
