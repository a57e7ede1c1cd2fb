"""Packed rows vs padded rows: padding waste and training tokens/s on documents of mixed length.

Run: OMP_NUM_THREADS=2 python bench/packing.py --docs 4000 --seq-len 1024 --batch 8 \\
       --steps 10 --layers 4 --d-model 256 --device cpu [--write]

A synthetic JSONL corpus of `--docs` documents whose lengths are drawn log-normally (many
short ones, a long tail past --seq-len) is tokenised into bytes as `zoo train` does. The
same documents are then laid out two ways: packed (`zoo train --pack`: whole documents
best-fit into rows, kept apart by document_ids) and padded (one document per row, padded
to the batch's longest, kept out by attention_mask). Each layout trains a GPT-2-like decoder for
--steps steps of --batch rows (forward, backward and AdamW, as `zoo train` steps), rows
drawn alike; tokens/s counts real tokens only, so padding is work that earns nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import tempfile
import time
from pathlib import Path

import torch
from common import machine, write_section

import archzoo
from archzoo.training.data import prepare_stream
from archzoo.training.loop import batch_loss
from archzoo.training.objectives import IGNORE
from archzoo.training.packing import PAD_DOCUMENT, PackedRows, pack_stream
from archzoo.training.tokenizer import ByteTokenizer

WORDS = "the quick brown fox jumps over a lazy dog while my cat sat on the warm mat".split()


def write_corpus(path: Path, docs: int, seq_len: int, seed: int) -> None:
    """JSONL of `docs` documents with log-normal byte lengths (median seq_len / 6)."""
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(docs):
            target = max(8, int(rng.lognormvariate(math.log(seq_len / 6), 1.0)))
            words, size = [], 0
            while size < target:
                words.append(rng.choice(WORDS))
                size += len(words[-1]) + 1
            f.write(json.dumps({"text": " ".join(words)}) + "\n")


def rows_batch(rows: PackedRows, index: list[int], packed: bool) -> dict[str, torch.Tensor]:
    """A causal-LM batch of rows: targets are the next token of the same document."""
    ids, docs = rows.batch(index)
    same = (docs[:, 1:] == docs[:, :-1]) & (docs[:, 1:] != PAD_DOCUMENT)
    labels = torch.full_like(ids, IGNORE)
    labels[:, :-1] = torch.where(same, ids[:, 1:], IGNORE)
    if packed:
        return {"input_ids": ids, "document_ids": docs, "labels": labels}
    width = int((docs != PAD_DOCUMENT).sum(-1).max())  # dynamic padding: the longest row
    real = (docs != PAD_DOCUMENT).long()
    return {
        "input_ids": ids[:, :width],
        "attention_mask": real[:, :width],
        "labels": labels[:, :width],
    }


def run(rows: PackedRows, packed: bool, args: argparse.Namespace) -> dict[str, float]:
    """Train steps over rows drawn by a seeded generator: real tokens/s and the loss."""
    torch.manual_seed(0)
    spec = {
        "name": "bench-gpt",
        "family": "decoder",
        "vocab_size": 260,
        "d_model": args.d_model,
        "n_heads": max(1, args.d_model // 64),
        "d_ff": 4 * args.d_model,
        "n_layers": args.layers,
        "max_len": args.seq_len,
        "dropout": 0.0,
        "position": "learned",
        "attention": {"kind": "mha"},
        "block": "pre_ln",
        "norm": "layernorm",
        "ffn": {"kind": "mlp", "activation": "gelu_tanh"},
        "head": {"kind": "lm", "tie": True},
    }
    device = torch.device(args.device)
    model = archzoo.build_model(spec, device=device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(1)
    batches = [
        rows_batch(rows, torch.randint(0, len(rows), (args.batch,), generator=g).tolist(), packed)
        for _ in range(args.steps + 1)
    ]
    times, real, slots, losses = [], 0, 0, []
    for step, batch in enumerate(batches):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        count = int((batch["labels"] != IGNORE).sum())
        loss = batch_loss(model, batch, device, num_items=max(count, 1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        if step == 0:  # warm-up: one-time setup is not charged
            continue
        times.append(time.perf_counter() - start)
        real += int((batch["input_ids"] != rows.pad_id).sum())
        slots += batch["input_ids"].numel()
        losses.append(loss.item())  # per target token (num_items)
    return {
        "padding": 1.0 - real / slots,
        "tokens_per_s": real / sum(times),
        "step_s": statistics.median(times),
        "loss": statistics.fmean(losses),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=4000)
    ap.add_argument("--seq-len", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--d-model", type=int, default=256)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    tok = ByteTokenizer()
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.jsonl"
        write_corpus(corpus, args.docs, args.seq_len, seed=0)
        stream = prepare_stream([corpus], tok, Path(tmp) / "cache")
        span = (0, len(stream))
        layouts = {
            "padded": pack_stream(
                stream.tokens, stream.ends, tok.specials.eos, span, args.seq_len, 256, padded=True
            ),
            "packed": pack_stream(
                stream.tokens, stream.ends, tok.specials.eos, span, args.seq_len, 256
            ),
        }
        n_docs = len(layouts["packed"].spans)
        results = {name: run(rows, name == "packed", args) for name, rows in layouts.items()}
    lines = [
        f"`python bench/packing.py --docs {args.docs} --seq-len {args.seq_len} --batch "
        f"{args.batch} --steps {args.steps} --layers {args.layers} --d-model {args.d_model} "
        f"--device {args.device}` on {machine()}: {args.docs} documents (byte tokens, "
        f"log-normal lengths, median about {args.seq_len // 6}; {n_docs} pieces of at most "
        f"--seq-len), a GPT-2-like decoder trained "
        f"{args.steps} steps of {args.batch} rows per layout (after one warm-up step). "
        "Padded rows are cut to the batch's longest document (dynamic padding, the stronger "
        "baseline); tokens/s counts real tokens only.",
        "",
        "| layout | rows in the corpus | padding at --seq-len | padding (steps run) | "
        "real tokens/s | step s (median) | mean loss per token |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, rows in layouts.items():
        r = results[name]
        lines.append(
            f"| {name} | {len(rows)} | {rows.padding_fraction():.1%} | {r['padding']:.1%} | "
            f"{r['tokens_per_s']:,.0f} | {r['step_s']:.3f} | {r['loss']:.3f} |"
        )
    speedup = results["packed"]["tokens_per_s"] / results["padded"]["tokens_per_s"]
    lines += ["", f"Packed rows train {speedup:.2f}x the real tokens/s of padded rows."]
    print("\n".join(lines))
    if args.write:
        write_section("Packed vs padded rows (bench/packing.py)", lines)


if __name__ == "__main__":
    main()
