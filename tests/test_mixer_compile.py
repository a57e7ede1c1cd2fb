"""Every hybrid-stack mixer builds on meta and runs under torch.compile(fullgraph=True) on CPU.

One test per mixer (compiling is the slow part, so the layers are tiny): its one-layer
model builds on device="meta" without allocating, then the layer itself is compiled with
fullgraph=True (a graph break raises) and run twice through a cache: a chunked prefill of a
left-padded batch (several chunks and a remainder), then one decoding step. Outputs and the
cache after each call equal the same calls run eagerly, within 1e-5.
"""

from __future__ import annotations

import pytest
import torch
from conftest import tiny

import archzoo
from archzoo.model.stack import layer_cache
from archzoo.parts.cache import LayerCache, PartsCache, StateCache
from archzoo.parts.interfaces import AttentionContext
from archzoo.parts.masks import AttentionMask

D, PROMPT = 32, 9
BASE = {"name": "mixer", "family": "decoder", "position": "none", "head": "lm"}
MIXERS = {  # chunks of 4: the 9-token prompt spans two chunks and a remainder
    "gated_deltanet": {"n_k_heads": 2, "n_v_heads": 4, "head_k_dim": 8, "chunk_size": 4},
    "mamba2": {"d_inner": 48, "head_dim": 12, "state_size": 8, "n_groups": 2, "chunk_size": 4},
    "mamba": {"d_inner": 48, "state_size": 4, "dt_rank": 3, "inner_norms": True, "chunk_size": 4},
    "short_conv": {},
    "lightning": {"block_size": 4},
    "kimi_delta": {"n_heads": 2, "chunk_size": 4},
    "gated_mha": {"n_kv_heads": 2},  # Qwen3-Next's attention layer (a KV cache, not a state)
    "side_by_side": {  # Falcon-H1's layer: Mamba 2 beside attention, a cache of each
        "mixers": [
            {"kind": "mamba2", "d_inner": 48, "head_dim": 12, "state_size": 8, "chunk_size": 4},
            {"kind": "mha", "n_kv_heads": 2},
        ],
        "input_scales": [1.2, 0.9],
        "output_scales": [0.8, 1.1],
    },
    "shared_transformer": {  # Zamba 2's hybrid layer: a shared block (GQA, adapters), Mamba 2
        "mixer": {
            "kind": "mamba2",
            "d_inner": 48,
            "head_dim": 12,
            "state_size": 8,
            "chunk_size": 4,
        },
        "n_kv_heads": 2,
        "d_ff": 40,
        "adapter_rank": 4,
    },
}


def spec(name: str) -> dict:
    return {**tiny(n_layers=1), **BASE, "attention": {"kind": name, **MIXERS[name]}}


def new_cache(m: torch.nn.Module) -> LayerCache | StateCache | PartsCache:
    """The layer's cache as a decoding stack makes it (keys/values, a state, or both)."""
    return layer_cache(m, 2, PROMPT + 1, next(m.parameters()))


def cached(cache: LayerCache | StateCache | PartsCache) -> list[torch.Tensor]:
    if isinstance(cache, PartsCache):
        return [t for part in cache.parts for t in cached(part)]
    if isinstance(cache, StateCache):
        return list(cache.tensors.values())
    return [cache.k[:, :, : cache.length], cache.v[:, :, : cache.length]]


def run(layer, x: torch.Tensor, pad: torch.Tensor, cache) -> list[torch.Tensor]:
    """The prefill of x[:, :-1] then one step of x[:, -1:], through `cache`: the outputs."""
    prompt = AttentionMask.build(PROMPT, PROMPT, causal=True, key_padding=pad[:, :PROMPT])
    step = AttentionMask.build(1, PROMPT + 1, causal=True, key_padding=pad)
    e = x.flip(-1)  # the stack's embeddings, read by shared_transformer only
    with torch.no_grad():
        first = layer(
            x[:, :PROMPT], AttentionContext(prompt, cache=cache, embeddings=e[:, :PROMPT])
        )
        states = [t.clone() for t in cached(cache)]
        second = layer(x[:, PROMPT:], AttentionContext(step, cache=cache, embeddings=e[:, PROMPT:]))
    return [first, *states, second, *cached(cache)]


@pytest.mark.parametrize("name", sorted(MIXERS))
def test_mixer_builds_on_meta_and_compiles_with_fullgraph(name: str) -> None:
    meta = archzoo.build_model(spec(name), device="meta")
    assert all(p.device.type == "meta" for p in meta.parameters())
    torch.manual_seed(0)
    m = archzoo.build_model(spec(name)).decoder.blocks[0].attention.eval()
    with torch.no_grad():  # perturbed: nothing sits at its initial value
        for p in m.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    x = torch.randn(2, PROMPT + 1, D, generator=torch.Generator().manual_seed(1))
    pad = torch.ones(2, PROMPT + 1, dtype=torch.bool)
    pad[1, :3] = False  # row 1 left-padded
    eager = run(m, x, pad, new_cache(m))
    torch._dynamo.reset()
    # dynamic=False: the prefill and the step are two static graphs, as a decoding loop runs;
    # aot_eager: Dynamo's whole-graph capture and AOTAutograd's functionalisation (where an
    # in-place cache write or a data-dependent branch would fail), without inductor's C++
    # build (minutes for five layers on a shared CPU)
    compiled = torch.compile(m, fullgraph=True, dynamic=False, backend="aot_eager")
    got = run(compiled, x, pad, new_cache(m))
    assert len(got) == len(eager)
    for g, e in zip(got, eager, strict=True):
        assert g.shape == e.shape
        assert (g - e).abs().max() <= 1e-5
