"""archzoo vs transformers on the same configurations and weights, in one process and run.

Run: python bench/run.py [--repeats 5] [--compile] [--write]

Workloads: BERT-base MLM forward (8 x 128), GPT-2 small train step (4 x 256, forward +
backward), T5-small forward + backward (8 x 128 -> 32), GPT-2 greedy decoding (1 x 16 -> 128).
Both sides load one random-weight checkpoint (archzoo through from_hf), so the numbers
compare implementations, not initialisations. MFU is model FLOPs / time / measured fp32
matmul peak. A second table gives the GPT-2 train step's peak memory with and without
activation checkpointing (each case in a fresh process, since peak RSS only grows).
A third (--only train) times `zoo train`'s own optimizer step against a plain PyTorch loop
over transformers' GPT2LMHeadModel at the same batch: peak memory and tokens/s.
--compile adds torch.compile rows; --write puts the tables in bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch
import transformers as hf
from common import (
    gemv_floor,
    machine,
    matmul_peak,
    median_time,
    paired_times,
    peak_memory_growth,
    write_section,
)

import archzoo


def dense_flops(n_params: int, tokens: int, layers: int, seq: int, d: int) -> float:
    """Forward FLOPs: 2 per parameter per token plus attention scores and values."""
    return 2 * n_params * tokens + 4 * layers * seq * d * tokens


@dataclass
class Row:
    workload: str
    mode: str
    hf_times: list[float]
    az_times: list[float]
    tokens: int
    flops: float
    stream_s: float = 0.0  # decoding: time to stream the weights once per step (gemv_floor)

    @property
    def hf_s(self) -> float:
        return statistics.median(self.hf_times)

    @property
    def az_s(self) -> float:
        return statistics.median(self.az_times)

    def ceiling(self, peak: float) -> float:
        """The most any implementation could beat HF by: HF time / the roofline time."""
        return self.hf_s / max(self.flops / peak, self.stream_s)

    def cells(self, peak: float) -> list[str]:
        return [
            self.workload,
            self.mode,
            f"{self.hf_s * 1e3:.1f}",
            f"{self.az_s * 1e3:.1f}",
            f"{self.hf_s / self.az_s:.2f}x",
            f"{min(self.hf_times) / min(self.az_times):.2f}x",
            f"{self.tokens / self.hf_s:.0f}",
            f"{self.tokens / self.az_s:.0f}",
            f"{100 * self.flops / self.hf_s / peak:.1f}%",
            f"{100 * self.flops / self.az_s / peak:.1f}%",
            f"{self.ceiling(peak):.2f}x",
        ]


def load_pair(ref: torch.nn.Module, tmp: Path, name: str) -> archzoo.ZooModel:
    ref.save_pretrained(tmp / name)
    return archzoo.from_hf(tmp / name)


def bert_forward(tmp: Path, repeats: int, compile_: bool) -> list[Row]:
    ref = hf.BertForMaskedLM(hf.BertConfig()).eval()
    ours = load_pair(ref, tmp, "bert")
    ids = torch.randint(0, 30522, (8, 128))
    n = sum(p.numel() for p in ref.bert.encoder.parameters()) + 768 * 30522 + 768 * 768
    flops = dense_flops(n, ids.numel(), 12, 128, 768)
    rows = []
    for mode in ["eager"] + (["compiled"] if compile_ else []):
        r, o = (torch.compile(ref), torch.compile(ours)) if mode == "compiled" else (ref, ours)
        with torch.inference_mode():
            t_hf, t_az = paired_times(lambda r=r: r(input_ids=ids), lambda o=o: o(ids), repeats, 2)
        rows.append(Row("BERT-base forward 8x128", mode, t_hf, t_az, ids.numel(), flops))
    return rows


def gpt2_train(tmp: Path, repeats: int, compile_: bool) -> list[Row]:
    cfg = hf.GPT2Config(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    ref = hf.GPT2LMHeadModel(cfg).train()
    ours = load_pair(ref, tmp, "gpt2").train()
    ids = torch.randint(0, 50257, (4, 256))
    n = sum(p.numel() for p in ref.transformer.h.parameters()) + 768 * 50257
    flops = 3 * dense_flops(n, ids.numel(), 12, 256, 768)
    rows = []
    for mode in ["eager"] + (["compiled"] if compile_ else []):
        r, o = (torch.compile(ref), torch.compile(ours)) if mode == "compiled" else (ref, ours)

        def step_hf(r=r) -> None:
            r(input_ids=ids, labels=ids).loss.backward()
            ref.zero_grad(set_to_none=True)

        def step_az(o=o) -> None:
            o(ids, labels=ids).loss.backward()
            ours.zero_grad(set_to_none=True)

        t_hf, t_az = paired_times(step_hf, step_az, repeats)
        rows.append(Row("GPT-2 train step 4x256", mode, t_hf, t_az, ids.numel(), flops))
    return rows


def t5_train(tmp: Path, repeats: int) -> list[Row]:
    ref = hf.T5ForConditionalGeneration(
        hf.T5Config(dropout_rate=0.0, decoder_start_token_id=0)
    ).train()
    ours = load_pair(ref, tmp, "t5").train()
    src, tgt = torch.randint(0, 32128, (8, 128)), torch.randint(0, 32128, (8, 32))
    n_enc = sum(p.numel() for p in ref.encoder.block.parameters())
    n_dec = sum(p.numel() for p in ref.decoder.block.parameters()) + 512 * 32128
    flops = 3 * (
        dense_flops(n_enc, src.numel(), 6, 128, 512) + dense_flops(n_dec, tgt.numel(), 6, 32, 512)
    )

    def step_hf() -> None:
        ref(input_ids=src, decoder_input_ids=tgt, labels=tgt).loss.backward()
        ref.zero_grad(set_to_none=True)

    def step_az() -> None:
        ours(src, decoder_input_ids=tgt, labels=tgt).loss.backward()
        ours.zero_grad(set_to_none=True)

    t_hf, t_az = paired_times(step_hf, step_az, repeats)
    return [
        Row("T5-small fwd+bwd 8x128->32", "eager", t_hf, t_az, src.numel() + tgt.numel(), flops)
    ]


def gpt2_decode(tmp: Path, repeats: int) -> list[Row]:
    ref = hf.GPT2LMHeadModel(hf.GPT2Config()).eval()
    ours = load_pair(ref, tmp, "gpt2-decode")
    ids = torch.randint(0, 50257, (1, 16))
    kw = {"max_new_tokens": 128, "min_new_tokens": 128}
    mask = torch.ones_like(ids)
    out_hf = ref.generate(ids, attention_mask=mask, do_sample=False, pad_token_id=0, **kw)
    out_az = ours.generate(ids, **kw)
    if not torch.equal(out_hf, out_az):
        raise SystemExit("greedy decoding differs between archzoo and transformers")
    t_hf, t_az = paired_times(
        lambda: ref.generate(ids, attention_mask=mask, do_sample=False, pad_token_id=0, **kw),
        lambda: ours.generate(ids, **kw),
        repeats,
    )
    n = sum(p.numel() for p in ref.transformer.h.parameters()) + 768 * 50257
    flops = 128 * dense_flops(n, 1, 12, 80, 768)
    # each step streams every block matrix and the LM head from memory
    shapes = [(3 * 768, 768), (768, 768), (3072, 768), (768, 3072)] * 12 + [(50257, 768)]
    stream = 128 * gemv_floor(shapes)
    return [Row("GPT-2 greedy decode 1x16->128", "eager", t_hf, t_az, 128, flops, stream)]


MEMORY_CASES = {  # case: (library, checkpointing, logits returned)
    "transformers": ("hf", False, True),
    "transformers + gradient checkpointing": ("hf", True, True),
    "archzoo, logits returned": ("archzoo", False, True),
    "archzoo": ("archzoo", False, False),
    "archzoo + activation_checkpointing": ("archzoo", True, False),
}
# the issue's targets: archzoo's peak over transformers' in the same run
MEMORY_TARGETS = {"archzoo": 0.5, "archzoo + activation_checkpointing": 0.6}


def memory_one(case: str, repeats: int) -> dict[str, float]:
    """Peak RSS growth and time of one GPT-2 train step (4 x 256), in this fresh process."""
    lib, ckpt, with_logits = MEMORY_CASES[case]
    torch.manual_seed(0)
    ids = torch.randint(0, 50257, (4, 256))
    if lib == "hf":
        model = hf.GPT2LMHeadModel(
            hf.GPT2Config(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
        ).train()
        if ckpt:
            model.gradient_checkpointing_enable()

        def step() -> None:
            model(input_ids=ids, labels=ids).loss.backward()
    else:
        overrides = {"dropout": 0.0, "activation_checkpointing": ckpt}
        model = archzoo.build_model("gpt2", overrides).train()

        def step() -> None:
            model(ids, labels=ids, return_logits=with_logits).loss.backward()

    for p in model.parameters():  # gradients are part of the baseline, not of the peak
        p.grad = torch.zeros_like(p)
    # torch.utils.checkpoint imports torch._dynamo (with sympy: ~70 MiB of Python modules) on
    # its first call; transformers imports it at import time. Imported here for both sides,
    # so no library import is counted as a step's activations.
    importlib.import_module("torch._dynamo")
    gc.collect()
    growth = peak_memory_growth(step)  # the first step: nothing freed earlier to reuse
    seconds = median_time(step, repeats, warmup=0)
    return {"peak_growth": growth, "seconds": seconds}


def memory_table(repeats: int) -> list[str]:
    """Activation memory of the GPT-2 train step with and without checkpointing."""
    results = {}
    for case in MEMORY_CASES:
        cmd = [sys.executable, __file__, "--memory-one", case, "--repeats", str(repeats)]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        results[case] = json.loads(out.strip().splitlines()[-1])
    lines = [
        "GPT-2 small train step 4x256 (forward + backward), each case in a fresh process: "
        "peak growth of anonymous memory (sampled every ms) during the first step, over "
        "weights + gradients, and the median step "
        f"time of {repeats} more.",
        "",
        "| case | peak growth MiB | vs without checkpointing | vs transformers | target | step s |",
        "|---|---|---|---|---|---|",
    ]
    for case, r in results.items():
        lib, ckpt, _ = MEMORY_CASES[case]
        base = results["archzoo" if lib == "archzoo" else "transformers"]["peak_growth"]
        peer = results["transformers" + (" + gradient checkpointing" if ckpt else "")]
        ratio = r["peak_growth"] / peer["peak_growth"]
        target = MEMORY_TARGETS.get(case)
        verdict = (
            "" if target is None else f"<= {target}x: {'met' if ratio <= target else 'MISSED'}"
        )
        lines.append(
            f"| {case} | {r['peak_growth'] / 2**20:.0f} | {r['peak_growth'] / base:.0%} | "
            f"{ratio:.2f}x | {verdict} | {r['seconds']:.2f} |"
        )
    lines += [
        "",
        "archzoo rows without logits call `model(ids, labels=ids, return_logits=False)`: the LM "
        "head and cross-entropy run a chunk of tokens at a time (plugins/head/losses.py), so "
        "the (4 x 256 x 50257) fp32 logits, log-probabilities and their gradients (206 MB "
        "each) never exist; `archzoo, logits returned` is the default call, which keeps them. "
        "Checkpointing stores only each block's input.",
    ]
    return lines


TRAIN_CASES = ("plain PyTorch loop, transformers GPT2LMHeadModel", "zoo train step")
TRAIN_TARGETS = {"peak": 0.5, "tokens_per_s": 1.1}  # zoo train vs the plain loop


def train_one(case: str, repeats: int, shape: str, layers: int) -> dict[str, float]:
    """Peak memory growth of the first optimizer step and the median step time of one side,
    in this fresh process: the plain loop (transformers' GPT2LMHeadModel, labels=ids, AdamW)
    or `zoo train`'s own step (archzoo.training.loop: batch_loss and optimizer_for)."""
    from archzoo.training import TrainConfig
    from archzoo.training.loop import batch_loss, optimizer_for

    b, t = (int(x) for x in shape.split("x"))
    torch.manual_seed(0)
    ids = torch.randint(0, 50257, (b, t + 1))
    cfg = TrainConfig()
    if case == TRAIN_CASES[0]:
        model = hf.GPT2LMHeadModel(
            hf.GPT2Config(n_layer=layers, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
        ).train()
        opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)

        def loss() -> torch.Tensor:
            return model(input_ids=ids[:, :-1], labels=ids[:, :-1]).loss
    else:
        model = archzoo.build_model("gpt2", {"dropout": 0.0, "n_layers": layers}).train()
        opt = optimizer_for(model, cfg)
        batch = {"input_ids": ids[:, :-1], "labels": ids[:, 1:]}  # as the causal objective

        def loss() -> torch.Tensor:
            return batch_loss(model, batch, torch.device("cpu"), 0.0, float(b * t))

    def step() -> None:  # one optimizer step, as each loop does it
        loss().backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip)
        opt.step()
        opt.zero_grad(set_to_none=False)

    for p in model.parameters():  # gradients and AdamW's state are the baseline, not the peak
        p.grad = torch.zeros_like(p)
    for group in opt.param_groups:  # a zero-lr step allocates AdamW's moments
        group["lr"], lr = 0.0, group["lr"]
        opt.step()
        group["lr"] = lr
    importlib.import_module("torch._dynamo")  # no library import counted as activations
    gc.collect()
    growth = peak_memory_growth(step)  # the first step: nothing freed earlier to reuse
    seconds = median_time(step, repeats, warmup=0)
    return {"peak_growth": growth, "seconds": seconds, "tokens": b * t}


def train_table(repeats: int, shape: str, layers: int, rounds: int = 3) -> list[str]:
    """`zoo train`'s step against a plain PyTorch loop over transformers' GPT-2, same batch:
    `rounds` fresh processes a side, interleaved (plain, zoo, plain, zoo, ...), so a slow
    spell of the machine falls on both; each figure is the median over the rounds."""
    runs: dict[str, list[dict[str, float]]] = {case: [] for case in TRAIN_CASES}
    for _ in range(rounds):
        for case in TRAIN_CASES:
            cmd = [sys.executable, __file__, "--train-one", case, "--repeats", str(repeats)]
            cmd += ["--train-shape", shape, "--train-layers", str(layers)]
            out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
            runs[case].append(json.loads(out.strip().splitlines()[-1]))
    results = {
        case: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for case, rs in runs.items()
    }
    plain, ours = (results[c] for c in TRAIN_CASES)
    peak = ours["peak_growth"] / plain["peak_growth"]
    speed = plain["seconds"] / ours["seconds"]
    per_round = [p["seconds"] / z["seconds"] for p, z in zip(*runs.values(), strict=True)]

    def verdict(ok: bool) -> str:
        return "met" if ok else "MISSED"

    lines = [
        f"GPT-2 small ({layers} layers) optimizer step {shape} (forward, backward, gradient "
        "clipping, AdamW), each side in a fresh process: peak growth of anonymous memory "
        "(sampled every ms) during the first step over weights, gradients and AdamW state, "
        f"and the median step time of {repeats} more; {rounds} rounds of the two processes, "
        "interleaved, and the median of each figure over the rounds.",
        "",
        "| case | peak growth MiB | step s | tokens/s |",
        "|---|---|---|---|",
    ]
    for case, r in results.items():
        lines.append(
            f"| {case} | {r['peak_growth'] / 2**20:.0f} | {r['seconds']:.2f} | "
            f"{r['tokens'] / r['seconds']:.0f} |"
        )
    lines += [
        "",
        f"- peak memory: zoo train / plain loop = {peak:.2f}x (target <= "
        f"{TRAIN_TARGETS['peak']}x: {verdict(peak <= TRAIN_TARGETS['peak'])})",
        f"- tokens/s: zoo train / plain loop = {speed:.2f}x (target >= "
        f"{TRAIN_TARGETS['tokens_per_s']}x: {verdict(speed >= TRAIN_TARGETS['tokens_per_s'])}); "
        "round by round: " + ", ".join(f"{r:.2f}x" for r in per_round),
        "",
        "zoo train's step is `archzoo.training.loop.batch_loss` (the head's chunked token "
        "loss: no (B, T, 50257) logits) with the loop's `optimizer_for`; the plain loop is "
        "`GPT2LMHeadModel(input_ids, labels=input_ids).loss.backward()` and torch's AdamW.",
    ]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--compile", action="store_true", help="also time torch.compile'd models")
    parser.add_argument("--write", action="store_true", help="write the table to bench/RESULTS.md")
    parser.add_argument("--only", help="comma-separated subset: bert,gpt2,t5,decode,memory,train")
    parser.add_argument("--train-shape", default="4x256", help="train row: BATCHxSEQ")
    parser.add_argument("--train-layers", type=int, default=12, help="train row: GPT-2 layers")
    parser.add_argument(
        "--train-rounds", type=int, default=3, help="train row: interleaved rounds of each side"
    )
    parser.add_argument("--memory-one", help=argparse.SUPPRESS)
    parser.add_argument("--train-one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_one:
        print(json.dumps(memory_one(args.memory_one, args.repeats)))
        return
    if args.train_one:
        print(
            json.dumps(train_one(args.train_one, args.repeats, args.train_shape, args.train_layers))
        )
        return
    torch.manual_seed(0)
    chosen = set((args.only or "bert,gpt2,t5,decode,memory,train").split(","))
    peak = matmul_peak() if chosen & {"bert", "gpt2", "t5", "decode"} else 0.0
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        if "bert" in chosen:
            rows += bert_forward(tmp_path, args.repeats, args.compile)
        gc.collect()
        if "gpt2" in chosen:
            rows += gpt2_train(tmp_path, args.repeats, args.compile)
        gc.collect()
        if "t5" in chosen:
            rows += t5_train(tmp_path, args.repeats)
        if "decode" in chosen:
            rows += gpt2_decode(tmp_path, args.repeats)
    header = [
        "workload",
        "mode",
        "HF ms",
        "archzoo ms",
        "speed-up",
        "best-of speed-up",
        "HF tok/s",
        "archzoo tok/s",
        "HF MFU",
        "archzoo MFU",
        "ceiling",
    ]
    about = (
        f"`python bench/run.py --repeats {args.repeats}{' --compile' if args.compile else ''}`: "
        f"{machine()}, transformers {hf.__version__}; measured fp32 matmul peak "
        f"{peak / 1e9:.1f} GFLOP/s; medians of {args.repeats} interleaved runs. "
        "ceiling = HF time / the shortest time the work allows on this machine "
        "(FLOPs at the matmul peak; for decoding, streaming every weight once per step): "
        "no implementation can beat HF by more. best-of speed-up = ratio of the fastest runs "
        "(robust to other jobs on a shared machine)."
    )
    lines = [about, "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r.cells(peak)) + " |" for r in rows]
    lines.append("")
    by_mode = {(r.workload, r.mode): r for r in rows}
    for (workload, mode), r in by_mode.items():
        eager = by_mode.get((workload, "eager"))
        if mode == "compiled" and eager is not None:
            lines.append(
                f"- {workload}: archzoo compiled is {eager.hf_s / r.az_s:.2f}x HF eager "
                f"({eager.az_s / r.az_s:.2f}x archzoo eager)"
            )
    if rows:
        print("\n".join(lines))
        if args.write:
            write_section("archzoo vs transformers (bench/run.py)", lines)
    if "memory" in chosen:
        memory = memory_table(args.repeats)
        print("\n" + "\n".join(memory))
        if args.write:
            write_section(
                "Activation checkpointing: GPT-2 train step memory (bench/run.py)", memory
            )
    if "train" in chosen:
        table = train_table(args.repeats, args.train_shape, args.train_layers, args.train_rounds)
        print("\n" + "\n".join(table))
        if args.write:
            write_section("zoo train step vs a plain PyTorch loop (bench/run.py)", table)


if __name__ == "__main__":
    main()
