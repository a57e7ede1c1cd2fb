"""Where archzoo's greedy decoding spends time beyond its kernels: GPT-2 small, one layer of
the framework added at a time, every variant checked to give archzoo's tokens.

Run: python bench/decode_overhead.py [--dtype bf16|fp32] [--batch 1] [--repeats 11] [--write]

kernels   every op of archzoo's call, in its order, on its weights (generation.call_kernels)
modules   the same ops through the model's own modules (norms, linears, embeddings): the
          least any nn.Module implementation pays
blocks    archzoo's blocks, attention and FFN forwards (their contexts, cache and mask
          objects), the embedding, final norm and head still called directly
stack     archzoo's whole decoder stack, the head called directly
model     archzoo's model forward (input checks, heads, outputs)
generate  archzoo's `generate` (its loop, eos bookkeeping and cache set-up)
Each is timed as a whole greedy call (prefill, then one-row steps) in interleaved rounds;
`kernels / this` is the median of each round's own ratio, so a slower row is the cost of
what that layer adds. `floor / this` puts it on generation.py's matmul floor.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
import transformers
from common import interleaved_times, machine, write_section
from generation import PROMPT_LEN, call_floor, call_kernels
from torch import Tensor

import archzoo
from archzoo.parts.cache import KVCache
from archzoo.parts.interfaces import AttentionContext
from archzoo.parts.masks import AttentionMask

Step = Callable[[object, Tensor, Tensor, int], Tensor]  # (state, tokens, positions, past)


def greedy(
    ids: Tensor, n: int, new_state: Callable[[], object], step: Step
) -> Callable[[], Tensor]:
    """A greedy call of n new tokens around `step`, with generate's bookkeeping left out."""
    B, L = ids.shape

    def call() -> Tensor:
        with torch.inference_mode():
            out = ids.new_empty(B, L + n)
            out[:, :L] = ids
            state = new_state()
            out[:, L] = token = step(state, ids, torch.arange(L).expand(B, L), 0)
            for i in range(1, n):
                pos = torch.full((B, 1), L + i - 1)
                out[:, L + i] = token = step(state, token[:, None], pos, L + i - 1)
            return out

    return call


def variants(model: archzoo.ZooModel, ids: Tensor, n: int) -> dict[str, Callable[[], Tensor]]:
    stack, head = model.decoder, model.head.proj
    blocks = [stack.blocks[i] for i in stack.layer_map]
    H, hd = blocks[0].attention.n_heads, blocks[0].attention.head_dim
    eos = torch.tensor([model.spec.data["eos_token_id"]])
    B, L = ids.shape
    dtype = head.weight.dtype

    def pick(logits: Tensor) -> Tensor:  # min_new_tokens' eos fill, then greedy
        return logits.index_fill_(-1, eos, -float("inf")).max(-1).indices

    def buffers() -> list[tuple[Tensor, ...]]:
        return [tuple(torch.empty(B, H, L + n, hd, dtype=dtype) for _ in "kv") for _ in blocks]

    def modules(caches: list[tuple[Tensor, ...]], tokens: Tensor, pos: Tensor, past: int):
        T = tokens.shape[1]
        x = stack.embedding.word(tokens) + stack.position.table(pos)  # (B, T, D)
        for b, (k_cache, v_cache) in zip(blocks, caches, strict=True):
            a, f = b.attention, b.ffn
            qkv = a.qkv(b.attention_norm(x)).view(B, T, 3 * H, hd).transpose(1, 2)
            q, k, v = qkv.split_with_sizes([H, H, H], dim=1)  # (B, H, T, hd) each
            k_cache.narrow(2, past, T).copy_(k)
            v_cache.narrow(2, past, T).copy_(v)
            keys, values = k_cache.narrow(2, 0, past + T), v_cache.narrow(2, 0, past + T)
            o = F.scaled_dot_product_attention(q, keys, values, is_causal=T > 1)
            x = x + a.out(o.transpose(1, 2).reshape(B, T, H * hd))
            x = x + f.fc_out(f.act(f.fc_in(b.ffn_norm(x))))
        return pick(head(stack.final_norm(x)[:, -1:])[:, -1])

    def archzoo_blocks(cache: KVCache, tokens: Tensor, pos: Tensor, past: int):
        T = tokens.shape[1]
        k_pos, _ = cache.advance(pos, None)
        x = stack.embedding.word(tokens) + stack.position.table(pos)
        mask = AttentionMask.build(T, k_pos.shape[1], causal=True, device=tokens.device)
        state = stack.position.prepare(pos, k_pos)
        ctx = AttentionContext(mask, stack.position, state, inputs={}, input_ids=tokens)
        for j, b in enumerate(blocks):
            x = b(x, ctx.with_cache(cache.layers[j]))
        return pick(head(stack.final_norm(x)[:, -1:])[:, -1])

    def archzoo_stack(cache: KVCache, tokens: Tensor, pos: Tensor, past: int):
        return pick(head(stack(tokens, position_ids=pos, cache=cache)[:, -1:])[:, -1])

    def archzoo_model(cache: KVCache, tokens: Tensor, pos: Tensor, past: int):
        out = model(tokens, position_ids=pos, cache=cache, logits_to_keep=1)
        return pick(out.logits[:, -1])

    def new_cache() -> KVCache:
        return model.new_cache(B, L + n)

    def generate() -> Tensor:
        return model.generate(ids, max_new_tokens=n, min_new_tokens=n)

    return {
        "kernels": call_kernels(model, ids, n),
        "modules": greedy(ids, n, buffers, modules),
        "blocks": greedy(ids, n, new_cache, archzoo_blocks),
        "stack": greedy(ids, n, new_cache, archzoo_stack),
        "model": greedy(ids, n, new_cache, archzoo_model),
        "generate": generate,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=11)
    parser.add_argument("--write", action="store_true", help="write the table to RESULTS.md")
    args = parser.parse_args()
    dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[args.dtype]
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        transformers.GPT2LMHeadModel(transformers.GPT2Config()).save_pretrained(Path(tmp) / "m")
        model = archzoo.from_hf(Path(tmp) / "m", dtype=dtype)
    n, gen = args.new_tokens, torch.Generator().manual_seed(args.batch)
    ids = torch.randint(0, 50257, (args.batch, PROMPT_LEN), generator=gen)
    fns = variants(model, ids, n)
    tokens = fns["generate"]()
    for name, fn in fns.items():
        if not torch.equal(fn(), tokens):
            raise SystemExit(f"{name} gave other tokens than archzoo's generate")
    fns["floor"] = call_floor(model, args.batch, n, attention=False)
    times = interleaved_times(fns, args.repeats)

    def ratio(a: str, b: str) -> float:
        return statistics.median(x / y for x, y in zip(times[a], times[b], strict=True))

    lines = [
        f"`python bench/decode_overhead.py --dtype {args.dtype} --batch {args.batch}`: GPT-2 "
        f"small, greedy, prompt {PROMPT_LEN}, {n} new tokens, medians of {args.repeats} "
        f"interleaved rounds; {machine()}. Every variant gave archzoo's tokens.",
        "",
        "| variant | ms per token | kernels / this | floor / this |",
        "|---|---:|---:|---:|",
    ]
    for name in [name for name in fns if name != "floor"]:
        ms = statistics.median(times[name]) / n * 1e3
        lines.append(
            f"| {name} | {ms:.2f} | {ratio('kernels', name):.3f} | {ratio('floor', name):.3f} |"
        )
    print("\n".join(lines))
    if args.write:
        title = f"Decoding overhead, {args.dtype} batch {args.batch} (bench/decode_overhead.py)"
        write_section(title, lines)


if __name__ == "__main__":
    main()
