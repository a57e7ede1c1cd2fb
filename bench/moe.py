"""MoE layer forward+backward: archzoo's grouped-matmul `moe` vs transformers' Mixtral and
Qwen3-MoE blocks on the same weights, interleaved in one run.

Run: python bench/moe.py [--tokens 2048] [--repeats 7] [--write]

Both sides compute the same function (checked before timing); the ratio is transformers'
median time over archzoo's (> 1: archzoo faster). The floor column is the time of the
expert matmuls alone at the measured routing (one dense matmul per expert on exactly the
tokens it receives, forward and backward), the least any implementation must spend.
"""

from __future__ import annotations

import argparse
import statistics

import torch
import transformers as hf
from common import machine, paired_times, write_section
from transformers.models.mixtral.modeling_mixtral import MixtralSparseMoeBlock
from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeSparseMoeBlock

import archzoo

SHAPES = {  # name: (d_model, d_expert, experts, top_k, transformers block)
    "mixtral-shaped (1/8 width)": (512, 1792, 8, 2, "mixtral"),
    "qwen3-moe-shaped (1/4 width)": (512, 192, 64, 8, "qwen3"),
}


def hf_block(kind: str, d: int, f: int, e: int, k: int) -> torch.nn.Module:
    if kind == "mixtral":
        cfg = hf.MixtralConfig(
            hidden_size=d, intermediate_size=f, num_local_experts=e, num_experts_per_tok=k
        )
        return MixtralSparseMoeBlock(cfg)
    cfg = hf.Qwen3MoeConfig(
        hidden_size=d,
        moe_intermediate_size=f,
        num_experts=e,
        num_experts_per_tok=k,
        norm_topk_prob=True,
    )
    return Qwen3MoeSparseMoeBlock(cfg)


def ours_block(d: int, f: int, e: int, k: int, ref: torch.nn.Module) -> torch.nn.Module:
    spec = {
        "family": "decoder",
        "vocab_size": 8,
        "d_model": d,
        "n_heads": 8,
        "n_layers": 1,
        "d_ff": f,
        "ffn": {"kind": "moe", "n_experts": e, "top_k": k, "aux_loss_coef": 0.0},
    }
    ffn = archzoo.build_model(spec).decoder.blocks[0].ffn
    with torch.no_grad():
        ffn.router.weight.copy_(ref.gate.weight)
        ffn.w_in.copy_(ref.experts.gate_up_proj.transpose(1, 2))
        ffn.w_out.copy_(ref.experts.down_proj.transpose(1, 2))
    return ffn


def floor_fn(ffn: torch.nn.Module, x: torch.Tensor):
    """Expert matmuls only, at the routing of x: per expert, its tokens through gate|up and down."""
    h = x.reshape(-1, x.shape[-1])
    with torch.no_grad():
        idx = ffn.router(h).topk(ffn.cfg.top_k, dim=-1).indices.reshape(-1)
        counts = torch.bincount(idx, minlength=ffn.cfg.n_experts).tolist()
    inputs = [torch.randn(c, h.shape[1], requires_grad=True) for c in counts]
    w_in = [ffn.w_in[e].detach().clone().requires_grad_() for e in range(len(counts))]
    w_out = [ffn.w_out[e].detach().clone().requires_grad_() for e in range(len(counts))]

    def run() -> None:
        total = 0
        for a, wi, wo in zip(inputs, w_in, w_out, strict=True):
            total = total + ((a @ wi)[:, : wo.shape[0]] @ wo).sum()
        total.backward()

    return run


def fwd_bwd(module: torch.nn.Module, x: torch.Tensor):
    def run() -> None:
        module.zero_grad(set_to_none=True)
        module(x).sum().backward()

    return run


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=2048)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    torch.manual_seed(0)
    rows = []
    for name, (d, f, e, k, kind) in SHAPES.items():
        ref = hf_block(kind, d, f, e, k)
        for p in ref.parameters():
            torch.nn.init.normal_(p, std=0.02)
        ours = ours_block(d, f, e, k, ref)
        x = torch.randn(1, args.tokens, d)
        with torch.no_grad():
            diff = (ours(x) - ref(x)).abs().max().item()
        assert diff < 1e-4, f"{name}: outputs differ by {diff}"
        t_hf, t_az = paired_times(fwd_bwd(ref, x), fwd_bwd(ours, x), args.repeats)
        t_floor = statistics.median(
            paired_times(floor_fn(ours, x), floor_fn(ours, x), max(3, args.repeats // 2))[0]
        )
        hf_s, az_s = statistics.median(t_hf), statistics.median(t_az)
        rows.append(
            f"| {name} | {d}/{f}/{e}/{k} | {hf_s * 1e3:.1f} | {az_s * 1e3:.1f} | "
            f"{hf_s / az_s:.2f}x | {min(t_hf) / min(t_az):.2f}x | {t_floor * 1e3:.1f} | "
            f"{t_floor / az_s:.2f} |"
        )
        print(rows[-1], flush=True)
    header = [
        f"`python bench/moe.py --tokens {args.tokens}` on {machine()}: one MoE layer, forward "
        "+ backward of `sum(out)`, same weights, interleaved runs (ms, medians).",
        "",
        "| shape | d/F/E/k | transformers | archzoo | speed-up (median) | (best-of) | "
        "expert-matmul floor | floor / archzoo |",
        "|---|---|---|---|---|---|---|---|",
    ]
    print("\n".join(header))
    if args.write:
        write_section("MoE layer forward+backward vs transformers", header + rows)


if __name__ == "__main__":
    main()
