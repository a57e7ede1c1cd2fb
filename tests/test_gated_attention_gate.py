"""gated_mha's gate options against a hand computation: with gate_source own_projection the
gate is W_g x (bias-free; H x head_dim wide per channel, or H wide per head), act(gate) scales
each head's output (sigmoid, or softplus as Laguna), then the output projection; with the
default (query) the gate is the second half of each head's query projection (Qwen3-Next).

The reference is written with plain matmuls and a causal softmax over GQA-repeated keys
(position none, qk_norm off), <= 1e-5 in float32; a padded row equals its unpadded self; the
per-head gate on a query source is refused with the option named.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import tiny
from test_recurrent_mixers import BASE, D, context
from torch import Tensor

import archzoo
from archzoo.errors import SpecError

H, HKV, HD = 4, 2, 8  # D = 32 = H * HD


def layer(**gate) -> torch.nn.Module:
    """The gated attention of a one-layer decoder, every weight perturbed off its init."""
    torch.manual_seed(0)
    att = {"kind": "gated_mha", "n_kv_heads": HKV, "qk_norm": False, **gate}
    m = archzoo.build_model({**tiny(n_layers=1), **BASE, "attention": att})
    m = m.decoder.blocks[0].attention
    with torch.no_grad():
        for p in m.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return m.eval()


def reference(m, x: Tensor, source: str, act: str, per: str) -> Tensor:
    B, T, _ = x.shape
    if source == "query":
        qg = (x @ m.q.weight.T).view(B, T, H, 2 * HD)
        q, gate = qg[..., :HD], qg[..., HD:]  # each head's [query | gate]
    else:
        q = (x @ m.q.weight.T).view(B, T, H, HD)
        gate = (x @ m.gate.weight.T).view(B, T, H, -1)  # (.., H, HD) or (.., H, 1)
    k = (x @ m.k.weight.T).view(B, T, HKV, HD).repeat_interleave(H // HKV, dim=2)
    v = (x @ m.v.weight.T).view(B, T, HKV, HD).repeat_interleave(H // HKV, dim=2)
    scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / HD**0.5
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    probs = scores.masked_fill(~causal, float("-inf")).softmax(-1)
    out = torch.einsum("bhqk,bkhd->bqhd", probs, v)  # (B, T, H, HD)
    g = torch.sigmoid(gate) if act == "sigmoid" else F.softplus(gate)
    return (out * g).reshape(B, T, H * HD) @ m.out.weight.T


CASES = [
    ("query", "sigmoid", "channel"),  # Qwen3-Next
    ("own_projection", "sigmoid", "channel"),  # AFMoE
    ("own_projection", "sigmoid", "head"),  # LFM3
    ("own_projection", "softplus", "head"),  # Laguna
    ("own_projection", "softplus", "channel"),  # Laguna, gating: per-channel
]


@pytest.mark.parametrize("source,act,per", CASES)
def test_gate_equals_the_hand_computation(source: str, act: str, per: str) -> None:
    m = layer(gate_source=source, gate_activation=act, gate_per=per)
    widths = {"query": None, "channel": H * HD, "head": H}
    if source == "own_projection":
        assert tuple(m.gate.weight.shape) == (widths[per], D) and m.gate.bias is None
        assert tuple(m.q.weight.shape) == (H * HD, D)
    else:
        assert m.gate is None and tuple(m.q.weight.shape) == (2 * H * HD, D)
    x = torch.randn(2, 11, D, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        got = m(x, context(11, 11))
        want = reference(m, x, source, act, per)
    assert got.shape == (2, 11, D)
    assert (got - want).abs().max() <= 1e-5


def test_left_padded_row_equals_its_unpadded_self() -> None:
    m = layer(gate_source="own_projection", gate_activation="softplus", gate_per="head")
    x = torch.randn(2, 11, D, generator=torch.Generator().manual_seed(2))
    pad = torch.ones(2, 11, dtype=torch.bool)
    pad[1, :3] = False
    with torch.no_grad():
        padded = m(x, context(11, 11, pad))[1, 3:]
        alone = m(x[1:, 3:], context(8, 8))[0]
    assert (padded - alone).abs().max() <= 1e-5


def test_per_head_gate_needs_its_own_projection() -> None:
    att = {"kind": "gated_mha", "gate_per": "head"}
    with pytest.raises(SpecError) as err:
        archzoo.build_model({**tiny(n_layers=1), **BASE, "attention": att})
    want = (
        "attention.gate_per: head needs gate_source: own_projection (a query gate is per channel)"
    )
    assert str(err.value) == want
