"""Time and peak memory of one encoder layer vs sequence length: local, bigbird, dense mha.

Run: python bench/sparse_attention.py [--lengths 1024 2048 4096 8192 16384] [--write]
Each (attention, length) runs in a fresh subprocess (batch 1, d_model 768, 12 heads, fp32,
forward without grad, best of --repeats); peak memory is the growth of the process's peak
resident set during the forward, so it counts every allocation. --write appends the table
to bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import subprocess
import sys
import time

import torch
from common import write_section

ATTENTIONS = {
    "local": {"kind": "local", "window": 128},
    "bigbird": {"kind": "bigbird", "block": 64, "window_blocks": 3, "random_blocks": 3},
    "mha": {"kind": "mha"},
}
D_MODEL, N_HEADS = 768, 12


def measure(name: str, length: int, repeats: int) -> dict:
    """One pre-LN encoder layer on (1, length, 768): layer seconds and MiB, attention seconds."""
    import archzoo
    from archzoo.parts.interfaces import AttentionContext
    from archzoo.parts.masks import AttentionMask

    spec = {
        "name": "bench",
        "family": "encoder",
        "vocab_size": 8,
        "d_model": D_MODEL,
        "n_heads": N_HEADS,
        "n_layers": 1,
        "max_len": length,
        "dropout": 0.0,
        "position": "none",
        "attention": ATTENTIONS[name],
        "block": "pre_ln",
    }
    layer = archzoo.build_model(spec).encoder.blocks[0].eval()
    x = torch.randn(1, length, D_MODEL)
    ctx = AttentionContext(AttentionMask.build(length, length, causal=False))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    seconds = best_of(lambda: layer(x, ctx), repeats)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before  # KiB on Linux
    attention = best_of(lambda: layer.attention(x, ctx), repeats)
    return {"seconds": seconds, "peak_mib": peak / 1024, "attention_seconds": attention}


@torch.no_grad()
def best_of(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def run_all(lengths: list[int], repeats: int) -> dict[tuple[str, int], dict]:
    results = {}
    for length in lengths:
        for name in ATTENTIONS:
            cmd = [sys.executable, __file__, "--one", name, str(length), "--repeats", str(repeats)]
            out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
            results[name, length] = json.loads(out.strip().splitlines()[-1])
            r = results[name, length]
            print(
                f"{name:8s} n={length:6d}  layer {r['seconds']:8.3f} s  {r['peak_mib']:9.1f} MiB"
                f"  attention {r['attention_seconds']:8.3f} s",
                flush=True,
            )
    return results


def table(results: dict[tuple[str, int], dict], lengths: list[int]) -> str:
    names = list(ATTENTIONS)
    head = "| n | " + " | ".join(f"{n} layer s | {n} MiB | {n} attn s" for n in names) + " |"
    rule = "|---" * (1 + 3 * len(names)) + "|"
    rows = [head, rule]
    for length in lengths:
        cells = []
        for n in names:
            r = results[n, length]
            cells += [
                f"{r['seconds']:.3f}",
                f"{r['peak_mib']:.0f}",
                f"{r['attention_seconds']:.3f}",
            ]
        rows.append(f"| {length} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", type=int, nargs="+", default=[1024, 2048, 4096, 8192, 16384])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--one", nargs=2, metavar=("ATTENTION", "LENGTH"), help=argparse.SUPPRESS)
    ap.add_argument("--write", action="store_true", help="write the table to bench/RESULTS.md")
    args = ap.parse_args()
    if args.one:
        print(json.dumps(measure(args.one[0], int(args.one[1]), args.repeats)))
        return
    results = run_all(args.lengths, args.repeats)
    text = table(results, args.lengths)
    print(text)
    lengths = args.lengths
    summary = []
    if 4096 in lengths and 16384 in lengths:
        for key, what in (("seconds", "layer"), ("attention_seconds", "attention alone")):
            grow = results["local", 16384][key] / results["local", 4096][key]
            speed = results["mha", 16384][key] / results["local", 16384][key]
            summary.append(
                f"- {what}: local time 4k -> 16k x{grow:.2f}; dense / local at 16k x{speed:.2f}"
            )
            print(summary[-1])
    if args.write:
        env = (
            f"torch {torch.__version__}, {platform.processor() or platform.machine()}, "
            f"{torch.get_num_threads()} threads"
        )
        section = [
            "`python bench/sparse_attention.py --write`: pre-LN layer (attention + MLP), "
            f"batch 1, d_model {D_MODEL}, {N_HEADS} heads, fp32, forward without grad, best "
            f"of {args.repeats}; peak = growth of peak RSS during the forward. {env}. "
            "local: window 128; bigbird: blocks of 64, 3-block window, 1+1 global, 3 random; "
            "mha: dense SDPA.",
            "",
            text,
            "",
            *summary,
        ]
        write_section("Sparse attention: one encoder layer vs sequence length", section)


if __name__ == "__main__":
    main()
