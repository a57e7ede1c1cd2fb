"""Relative positions: Shaw et al. against a per-pair loop, T5 buckets against HF's function."""

from __future__ import annotations

import math

import pytest
import torch

import archzoo
from archzoo.parts.interfaces import AttentionContext
from archzoo.parts.masks import AttentionMask
from archzoo.plugins.position.t5_relative import t5_buckets

TINY = {"n_layers": 1, "d_model": 16, "n_heads": 2, "d_ff": 32, "vocab_size": 50, "dropout": 0.0}


def shaw_reference(q, k, v, key_table, value_table, max_distance, causal):
    """Shaw et al. eqs. (3)-(5) one pair at a time: q, k, v are (T, H, hd)."""
    T, H, hd = q.shape
    out = torch.zeros(T, H, hd, dtype=torch.float64)
    for h in range(H):
        for i in range(T):
            keys = range(i + 1) if causal else range(T)
            e = torch.full((T,), -math.inf, dtype=torch.float64)
            for j in keys:
                r = max(-max_distance, min(max_distance, j - i)) + max_distance
                e[j] = q[i, h] @ (k[j, h] + key_table[r]) / math.sqrt(hd)
            a = e.softmax(0)
            for j in keys:
                r = max(-max_distance, min(max_distance, j - i)) + max_distance
                extra = value_table[r] if value_table is not None else 0.0
                out[i, h] += a[j] * (v[j, h] + extra)
    return out


@pytest.mark.parametrize("value_term", [False, True])
@pytest.mark.parametrize("causal", [False, True])
def test_shaw_relative_attention_equals_per_pair_computation(value_term, causal):
    torch.manual_seed(0)
    T, k = 9, 3
    family = {"family": "decoder"} if causal else {"family": "encoder", "block": "post_ln"}
    pos = {"kind": "relative", "max_distance": k, "value_term": value_term}
    model = archzoo.build_model("gpt2", {**TINY, **family, "head": "none", "position": pos})
    stack = model.decoder if causal else model.encoder
    att, position = stack.blocks[0].attention, stack.position
    h = torch.randn(1, T, 16)
    p = torch.arange(T)[None]
    ctx = AttentionContext(
        AttentionMask.build(T, T, causal=causal), position, position.prepare(p, p)
    )
    got = att(h, ctx)
    q, kk, v = (t.view(T, 2, 8).double() for t in att.qkv(h)[0].split(16, -1))
    vt = position.value_table.weight.double() if value_term else None
    ref = shaw_reference(q, kk, v, position.key_table.weight.double(), vt, k, causal)
    expected = att.out(ref.reshape(1, T, 16).float())
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("n_buckets, max_distance", [(32, 128), (16, 64), (8, 20)])
def test_t5_buckets_equal_hf_for_distances_minus_200_to_200(bidirectional, n_buckets, max_distance):
    from transformers.models.t5.modeling_t5 import T5Attention

    d = torch.arange(-200, 201)
    expected = T5Attention._relative_position_bucket(
        d, bidirectional=bidirectional, num_buckets=n_buckets, max_distance=max_distance
    )
    got = t5_buckets(d, bidirectional=bidirectional, n_buckets=n_buckets, max_distance=max_distance)
    assert torch.equal(got, expected)


def test_t5_bias_is_computed_once_per_stack_and_indexed_by_bucket():
    model = archzoo.build_model("gpt2", {**TINY, "n_layers": 3, "position": "t5_relative"})
    position = model.decoder.position
    p = torch.arange(5)[None]
    bias = position.prepare(p, p)  # (1, H, 5, 5)
    buckets = t5_buckets(
        p[0][None, :] - p[0][:, None], bidirectional=False, n_buckets=32, max_distance=128
    )
    expected = position.table.weight[buckets].permute(2, 0, 1)  # (H, 5, 5)
    torch.testing.assert_close(bias[0], expected)
    # one table for the whole stack, none inside the layers
    names = [n for n, _ in model.named_parameters() if "table" in n]
    assert names == ["decoder.position.table.weight"]
