"""Greedy decoding throughput: archzoo vs transformers.generate on GPT-2 small (random weights).

Run: python bench/generation.py [--new-tokens 128] [--repeats 3] [--write]
Both libraries decode the same checkpoint in the same process; tokens are checked equal.
With --write the table is added to bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

import torch
import transformers
from common import gemv_floor, machine, paired_times, write_section

import archzoo

PROMPT_LEN = 16
# (out, in) of every weight matrix a GPT-2 small decoding step streams: 12 blocks + LM head
GPT2_SHAPES = [(3 * 768, 768), (768, 768), (3072, 768), (768, 3072)] * 12 + [(50257, 768)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--write", action="store_true", help="write the table to bench/RESULTS.md")
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

        same = torch.equal(run_hf(), run_ours())
        times_hf, times_az = paired_times(run_hf, run_ours, args.repeats)
        t_hf, t_az = statistics.median(times_hf), statistics.median(times_az)
        rows.append((batch, batch * n / t_hf, batch * n / t_az, same))
    step = gemv_floor(GPT2_SHAPES)
    lines = [
        f"`python bench/generation.py --repeats {args.repeats}`: GPT-2 small (124M, random "
        f"weights), greedy, prompt {PROMPT_LEN}, {n} new tokens, medians of {args.repeats} "
        f"interleaved runs; {machine()}, transformers {transformers.__version__}. "
        f"roofline = batch / {step * 1e3:.1f} ms, the time PyTorch needs to stream the "
        "step's weights once (every block matrix and the LM head times one token): a "
        "decoding step at small batch cannot be faster.",
        "",
        "| batch | transformers tok/s | archzoo tok/s | speed-up | roofline tok/s | "
        "roofline / transformers | same tokens |",
        "|---:|---:|---:|---:|---:|---:|:---:|",
    ]
    for batch, hf_tps, az_tps, same in rows:
        roof = batch / step
        lines.append(
            f"| {batch} | {hf_tps:.1f} | {az_tps:.1f} | {az_tps / hf_tps:.2f}x | {roof:.1f} | "
            f"{roof / hf_tps:.2f}x | {same} |"
        )
    print("\n".join(lines))
    if args.write:
        write_section("Generation (bench/generation.py)", lines)


if __name__ == "__main__":
    main()
