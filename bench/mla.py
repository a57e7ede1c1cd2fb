"""Decoding memory and speed: multi-head latent attention (`mla`) vs GQA and MHA models of
the same width, in one run.

Run: python bench/mla.py [--context 2048] [--steps 32] [--layers 4] [--repeats 3] [--write]

The three models share d_model, heads, layers and FFN (DeepSeek-V2-Lite's attention sizes:
d_model 2048, 16 heads, latent 512, rotary key 64, nope/value 128; the peers use head_dim
128 with 4 or 16 KV heads). Cache bytes are measured on the allocated static cache
(`new_cache(...).memory_bytes()` / tokens) and checked against the formulas
(kv_lora_rank + rotary width) x layers x bytes and 2 x kv_heads x head_dim x layers x bytes.
Decode speed is batch 1, fp32, `--steps` cached steps after a `--context`-token prefill
(median ms per token); `mla` runs with the absorbed weights (default) and with the latent
expanded per head every step (`absorb: false`).
"""

from __future__ import annotations

import argparse
import time

import torch
from common import machine, write_section

import archzoo

D, HEADS, FF, VOCAB = 2048, 16, 5632, 1024
RANK, ROPE, NOPE, VDIM = 512, 64, 128, 128


def spec(attention: dict, head_dim: int, layers: int, max_len: int) -> dict:
    return {
        "family": "decoder",
        "vocab_size": VOCAB,
        "d_model": D,
        "n_heads": HEADS,
        "head_dim": head_dim,
        "n_layers": layers,
        "d_ff": FF,
        "max_len": max_len,
        "dropout": 0.0,
        "norm": "rmsnorm",
        "block": "pre_ln",
        "ffn": {"kind": "glu"},
        "head": {"kind": "lm", "tie": False},
        "position": {"kind": "rotary", "interleaved": attention["kind"] == "mla"},
        "attention": attention,
    }


def models(layers: int, max_len: int) -> dict[str, tuple[dict, int]]:
    """name -> (spec, expected cache numbers per token and layer)."""
    mla = {"kind": "mla", "kv_lora_rank": RANK, "qk_nope_head_dim": NOPE, "v_head_dim": VDIM}
    mha = {"kind": "mha", "fused_qkv": False, "bias": False}
    return {
        "mla (absorbed)": (spec(mla, ROPE, layers, max_len), RANK + ROPE),
        "mla (expanded)": (spec({**mla, "absorb": False}, ROPE, layers, max_len), RANK + ROPE),
        "gqa (4 kv heads)": (spec({**mha, "n_kv_heads": 4}, 128, layers, max_len), 2 * 4 * 128),
        "mha (16 kv heads)": (spec(mha, 128, layers, max_len), 2 * HEADS * 128),
    }


@torch.no_grad()
def decode_ms(model: archzoo.ZooModel, context: int, steps: int) -> float:
    """Median ms of one cached decoding step after a `context`-token prefill (batch 1)."""
    ids = torch.randint(0, VOCAB, (1, context), generator=torch.Generator().manual_seed(0))
    cache = model.decoder.new_cache(1, context + steps)
    logits = model(ids, cache=cache).logits
    token = logits[:, -1:].argmax(-1)
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        token = model(token, cache=cache).logits[:, -1:].argmax(-1)
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2] * 1e3


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--context", type=int, default=2048)
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    max_len = args.context + args.steps
    rows, per_token = [], {}
    for name, (data, numbers) in models(args.layers, max_len).items():
        torch.manual_seed(0)
        model = archzoo.build_model(data).eval()
        cache = model.decoder.new_cache(1, max_len)
        measured = cache.memory_bytes() / max_len
        expected = numbers * args.layers * 4
        assert measured == expected, f"{name}: cache {measured} bytes/token, formula {expected}"
        bf16 = measured / 2 / args.layers  # per layer, bf16
        per_token[name] = measured
        ms = min(decode_ms(model, args.context, args.steps) for _ in range(args.repeats))
        params = model.num_parameters() / 1e6
        rows.append([name, params, numbers, measured, bf16, ms])
        print(rows[-1], flush=True)
    base = per_token["gqa (4 kv heads)"]
    lines = [
        f"`python bench/mla.py --context {args.context} --steps {args.steps} --layers "
        f"{args.layers}` on {machine()}: d_model {D}, {HEADS} heads, {args.layers} layers, "
        f"batch 1, fp32; cache bytes measured on the allocated cache (= the formula); decode "
        "is the median ms of one cached step (best of "
        f"{args.repeats} runs) after a {args.context}-token prefill.",
        "",
        "| attention | params (M) | cached numbers / token / layer | cache bytes / token "
        "(fp32, all layers) | bf16 bytes / token / layer | vs GQA | decode ms / token |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, params, numbers, measured, bf16, ms in rows:
        lines.append(
            f"| {name} | {params:.1f} | {numbers} | {measured:,.0f} | {bf16:,.0f} | "
            f"{measured / base:.3f}x | {ms:.1f} |"
        )
    print("\n".join(lines))
    if args.write:
        write_section("MLA decoding: KV-cache memory and speed vs GQA (bench/mla.py)", lines)


if __name__ == "__main__":
    main()
