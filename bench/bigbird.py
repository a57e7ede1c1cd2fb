"""BigBird (block-sparse) at 4096 tokens: archzoo vs transformers on the same imported weights.

Run: python bench/bigbird.py [--layers 4] [--length 4096] [--repeats 5] [--write]
A bigbird-roberta-base-shaped BigBirdModel (d_model 768, 12 heads, blocks of 64, 3 random
blocks; random weights, --layers encoder layers to keep the run short) is saved and imported
with `archzoo.from_hf`. Whole-model and attention-only forwards run interleaved in one process
(HF, archzoo, HF, ...: the machine's load hits both alike) and the speed-up is the ratio of the
medians. Peak memory is the growth of anonymous RSS during one whole-model forward, each side
in a fresh process. --write puts the table in bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from common import machine, paired_times, peak_memory_growth, write_section

WHY = (
    "Why: transformers 5.23's block-sparse path assembles the dense (B, H, n, n) "
    "attention-probability matrix on every call (805 MB per layer at n = 4096, 12 heads) "
    "and multiplies the r = 3 copies of block 0 it draws in eval mode; archzoo runs one "
    "SDPA over 5 gathered key blocks per query block (block 0 weighted by log(1 + r)) and"
    " two dense rows of blocks. Whole-model ratios include the same-cost embeddings, "
    "projections and MLPs, so they fall toward the attention ratio's share as layers are "
    "added; the machine was shared (2 cores, heavy load), so only the interleaved ratios "
    "mean much."
)
TITLE = "BigBird block-sparse vs transformers at 4096 tokens (bench/bigbird.py)"


def save_checkpoint(directory: Path, layers: int) -> None:
    """A random bigbird-roberta-base-shaped BigBirdModel with `layers` layers, in HF layout."""
    import transformers as hf

    torch.manual_seed(0)
    config = hf.BigBirdConfig(num_hidden_layers=layers, attention_type="block_sparse")
    hf.BigBirdModel(config).eval().save_pretrained(directory)


def load(side: str, directory: Path) -> torch.nn.Module:
    """transformers' model or archzoo's import of the same checkpoint, in eval mode."""
    if side == "hf":
        import transformers as hf

        return hf.BigBirdModel.from_pretrained(directory).eval()
    import archzoo

    return archzoo.from_hf(directory).eval()


def inputs(length: int) -> dict[str, torch.Tensor]:
    ids = torch.randint(5, 50000, (1, length), generator=torch.Generator().manual_seed(0))
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


@torch.no_grad()
def attention_calls(hf_model, az_model, length: int):
    """One layer's self-attention each: HF's block-sparse q/k/v + core (without its output
    dense), archzoo's projections + core + output projection (a little more work)."""
    from archzoo.parts.interfaces import AttentionContext
    from archzoo.parts.masks import AttentionMask

    x = torch.randn(1, length, 768)
    ones = torch.ones(1, length)
    blocked, band, from_mask, to_mask = hf_model.create_masks_for_block_sparse_attn(ones, 64)
    hf_attn = hf_model.encoder.layer[0].attention.self
    az_attn = az_model.encoder.blocks[0].attention
    ctx = AttentionContext(AttentionMask.build(length, length, causal=False))

    def run_hf():
        return hf_attn(x, band, from_mask, to_mask, blocked, blocked)

    def run_az():
        return az_attn(x, ctx)

    return run_hf, run_az


def memory(side: str, directory: Path, length: int) -> int:
    """Bytes of anonymous RSS growth during one whole-model forward, in this process."""
    model = load(side, directory)
    feed = inputs(length)
    with torch.no_grad():
        model(**feed)  # first call: lazy initialisation is not the steady state
        return peak_memory_growth(lambda: model(**feed))


def measure(directory: Path, length: int, repeats: int) -> dict:
    hf_model, az_model = load("hf", directory), load("az", directory)
    feed = inputs(length)
    with torch.no_grad():
        want = hf_model(**feed).last_hidden_state
        got = az_model(**feed).last_hidden_state
    assert hf_model.attention_type == "block_sparse", "HF fell back to full attention"
    diff = (want - got).abs().max().item()
    with torch.no_grad():
        m_hf, m_az = paired_times(lambda: hf_model(**feed), lambda: az_model(**feed), repeats)
        a_hf, a_az = paired_times(*attention_calls(hf_model, az_model, length), repeats * 3)
    out = {"diff": diff}
    for key, times in (
        ("model_hf", m_hf),
        ("model_az", m_az),
        ("attn_hf", a_hf),
        ("attn_az", a_az),
    ):
        out[key] = statistics.median(times)
    for side in ("hf", "az"):
        cmd = [sys.executable, __file__, "--memory", side, str(directory), str(length)]
        run = subprocess.run(cmd, capture_output=True, text=True, check=True)
        out[f"mem_{side}"] = int(run.stdout.strip().splitlines()[-1])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--length", type=int, default=4096)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--memory", nargs=3, help=argparse.SUPPRESS)
    ap.add_argument("--write", action="store_true", help="write the table to bench/RESULTS.md")
    args = ap.parse_args()
    if args.memory:
        side, directory, length = args.memory
        print(memory(side, Path(directory), int(length)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        save_checkpoint(Path(tmp), args.layers)
        r = measure(Path(tmp), args.length, args.repeats)
    mib = 1024 * 1024
    rows = [
        "| forward | transformers | archzoo | speed-up |",
        "|---|---|---|---|",
        f"| whole model | {r['model_hf']:.3f} s | {r['model_az']:.3f} s | "
        f"x{r['model_hf'] / r['model_az']:.2f} |",
        f"| one attention layer | {r['attn_hf'] * 1e3:.1f} ms | {r['attn_az'] * 1e3:.1f} ms | "
        f"x{r['attn_hf'] / r['attn_az']:.2f} |",
        f"| peak memory (whole model) | {r['mem_hf'] / mib:.0f} MiB | {r['mem_az'] / mib:.0f} MiB "
        f"| x{r['mem_hf'] / max(r['mem_az'], 1):.2f} less |",
    ]
    print("\n".join(rows))
    print(f"max |last_hidden_state diff| {r['diff']:.2e}")
    if args.write:
        write_section(
            TITLE,
            [
                f"`python bench/bigbird.py --layers {args.layers} --write`: BigBirdModel of "
                f"bigbird-roberta-base's shape with {args.layers} of its 12 layers (random "
                f"weights), batch 1, {args.length} tokens, fp32, no grad; medians of "
                f"{args.repeats} interleaved runs (attention: {3 * args.repeats}); peak = "
                f"anonymous RSS growth in a fresh process per side. {machine()}.",
                "",
                *rows,
                "",
                f"Outputs agree: max |last_hidden_state diff| {r['diff']:.1e}.",
                "",
                WHY,
            ],
        )


if __name__ == "__main__":
    main()
