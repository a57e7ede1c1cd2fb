"""Longformer at 4096 tokens with global tokens: archzoo vs transformers on the same weights.

Run: python bench/longformer.py [--layers 4] [--length 4096] [--globals 8] [--repeats 5]
[--threads N] [--write]
A longformer-base-4096-shaped LongformerModel (d_model 768, 12 heads, window 512; random
weights, --layers of its 12 layers to keep the run short) is saved and imported with
`archzoo.from_hf`; the first --globals tokens get global attention (a question, say), passed
to both as `global_attention_mask`. Forwards run interleaved in one process (transformers,
archzoo, transformers, ...), so the load of a shared machine hits both alike; speed-ups are
ratios of medians. Attention alone is one layer's q/k/v, sliding-window + global core and
output projection on each side. Peak memory is the growth of anonymous RSS during one
whole-model forward, each side in a fresh process. --threads sets torch's thread count.
--write puts the table in RESULTS.md with the load average before and after the timed runs
(on a loaded machine transformers slows down more than archzoo, so the ratios grow).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from common import machine, paired_times, peak_memory_growth, write_section

TITLE = "Longformer vs transformers at 4096 tokens (bench/longformer.py)"
WIDTH = 768


def save_checkpoint(directory: Path, layers: int) -> None:
    """A random allenai/longformer-base-4096-shaped LongformerModel with `layers` layers."""
    import transformers as hf

    torch.manual_seed(0)
    config = hf.LongformerConfig(
        vocab_size=50265,
        max_position_embeddings=4098,
        type_vocab_size=1,
        layer_norm_eps=1e-5,
        attention_window=[512] * layers,
        num_hidden_layers=layers,
        pad_token_id=1,
    )
    hf.LongformerModel(config).eval().save_pretrained(directory)


def load_side(side: str, directory: Path) -> torch.nn.Module:
    """transformers' LongformerModel ('hf') or archzoo's import of it ('az')."""
    if side == "hf":
        import transformers as hf

        return hf.LongformerModel.from_pretrained(directory).eval()
    import archzoo

    return archzoo.from_hf(directory).eval()


def batch(length: int, n_global: int) -> dict[str, torch.Tensor]:
    """One sequence of random ids, every token real, the first `n_global` ones global."""
    ids = torch.randint(5, 50000, (1, length), generator=torch.Generator().manual_seed(0))
    glob = torch.zeros_like(ids)
    glob[:, :n_global] = 1
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "global_attention_mask": glob}


def one_attention_layer(hf_model, az_model, feed: dict[str, torch.Tensor]):
    """Callables running layer 0's attention on the same input: HF's self-attention and its
    output dense; archzoo's attention component (projections, core, output projection)."""
    from archzoo.parts.interfaces import AttentionContext
    from archzoo.parts.masks import AttentionMask

    length = feed["input_ids"].shape[1]
    x = torch.randn(1, length, WIDTH)
    glob = feed["global_attention_mask"].bool()
    hf_layer = hf_model.encoder.layer[0].attention
    big = torch.finfo(x.dtype).max
    hf_mask = torch.zeros(1, length).masked_fill(glob, big)  # HF: +max global, 0 local
    hf_args = dict(is_index_masked=torch.zeros_like(glob), is_index_global_attn=glob)
    az_attn = az_model.encoder.blocks[0].attention
    mask = AttentionMask.build(length, length, causal=False)
    ctx = AttentionContext(
        mask, inputs={"global_attention_mask": glob}, input_ids=feed["input_ids"]
    )

    def hf_run() -> torch.Tensor:
        out = hf_layer.self(x, hf_mask, is_global_attn=True, **hf_args)[0]
        return hf_layer.output.dense(out)

    return hf_run, lambda: az_attn(x, ctx)


def peak_bytes(side: str, directory: Path, length: int, n_global: int) -> int:
    """Anonymous RSS growth during one whole-model forward of `side`, after a first one."""
    model, feed = load_side(side, directory), batch(length, n_global)
    with torch.no_grad():
        model(**feed)
        return peak_memory_growth(lambda: model(**feed))


def fresh_process_peak(side: str, directory: Path, length: int, n_global: int) -> int:
    argv = [sys.executable, __file__, "--peak", side, str(directory), str(length), str(n_global)]
    done = subprocess.run(argv, capture_output=True, text=True, check=True)
    return int(done.stdout.split()[-1])


@torch.no_grad()
def compare(directory: Path, length: int, n_global: int, repeats: int) -> dict[str, float]:
    """Medians of interleaved runs, the outputs' largest difference, and both peaks."""
    hf_model, az_model = load_side("hf", directory), load_side("az", directory)
    feed = batch(length, n_global)
    diff = (hf_model(**feed).last_hidden_state - az_model(**feed).last_hidden_state).abs().max()
    load_before = os.getloadavg()[0]
    whole = paired_times(lambda: hf_model(**feed), lambda: az_model(**feed), repeats)
    attention = paired_times(*one_attention_layer(hf_model, az_model, feed), 3 * repeats)
    medians = [statistics.median(t) for t in (*whole, *attention)]
    result = dict(zip(("model_hf", "model_az", "attn_hf", "attn_az"), medians, strict=True))
    result["diff"] = float(diff)
    result["load"] = (load_before, os.getloadavg()[0])
    for side in ("hf", "az"):
        result[f"peak_{side}"] = fresh_process_peak(side, directory, length, n_global)
    return result


def table(r: dict[str, float]) -> list[str]:
    mib = 2**20
    return [
        "| forward | transformers | archzoo | archzoo's speed-up |",
        "|---|---|---|---|",
        f"| whole model | {r['model_hf']:.2f} s | {r['model_az']:.2f} s "
        f"| x{r['model_hf'] / r['model_az']:.2f} |",
        f"| attention, one layer | {r['attn_hf'] * 1e3:.0f} ms | {r['attn_az'] * 1e3:.0f} ms "
        f"| x{r['attn_hf'] / r['attn_az']:.2f} |",
        f"| peak memory, whole model | {r['peak_hf'] / mib:.0f} MiB | {r['peak_az'] / mib:.0f} MiB "
        f"| {r['peak_az'] / max(r['peak_hf'], 1):.2f} of transformers' |",
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--length", type=int, default=4096)
    ap.add_argument("--globals", type=int, default=8, help="leading tokens with global attention")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    ap.add_argument("--peak", nargs=4, help=argparse.SUPPRESS)  # side, dir, length, globals
    ap.add_argument("--write", action="store_true", help="write the table to bench/RESULTS.md")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.peak:
        side, directory, length, n_global = args.peak
        print(peak_bytes(side, Path(directory), int(length), int(n_global)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        save_checkpoint(Path(tmp), args.layers)
        r = compare(Path(tmp), args.length, args.globals, args.repeats)
    rows = table(r)
    load = f"load average {r['load'][0]:.1f} -> {r['load'][1]:.1f} during the timed runs"
    print("\n".join(rows) + f"\nmax |last_hidden_state diff| {r['diff']:.1e}; {load}")
    if not args.write:
        return
    threads = f" --threads {args.threads}" if args.threads else ""
    note = (
        f"`python bench/longformer.py --layers {args.layers} --repeats {args.repeats}{threads} "
        f"--write`: LongformerModel of "
        f"longformer-base-4096's shape with {args.layers} of its 12 layers (random weights, "
        f"imported by from_hf), batch 1, {args.length} tokens of which the first "
        f"{args.globals} are global, fp32, no grad; medians of {args.repeats} interleaved runs "
        f"(attention: {3 * args.repeats}); peak = anonymous RSS growth in a fresh process per "
        f"side. {machine()}; {load}."
    )
    outputs = f"Outputs agree: max |last_hidden_state diff| {r['diff']:.1e}."
    write_section(TITLE, [note, "", *rows, "", outputs])


if __name__ == "__main__":
    main()
