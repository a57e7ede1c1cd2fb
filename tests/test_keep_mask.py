"""`Attention.keep_mask` (what `zoo mask` draws) is what the layer really attends to."""

from __future__ import annotations

import pytest
import torch
from conftest import tiny

import archzoo
from archzoo.parts.interfaces import AttentionContext
from archzoo.parts.masks import AttentionMask

TINY = tiny(n_layers=1, max_len=128, position={"kind": "rotary"})
KINDS = {
    "mha": {},
    "local": {"window": 7},
    "strided": {"stride": 6, "block": 8},
    "fixed": {"stride": 8, "summary": 2, "block": 8},
    "block_sparse": {"block": 8, "local_blocks": 1, "global_blocks": 1},
    "bigbird": {"block": 8, "random_blocks": 2, "seed": 5},
    "longformer": {"window": 6, "global_tokens": [0, 9], "block": 8},
}


def dependence(attention: torch.nn.Module, stack: torch.nn.Module, T: int) -> torch.Tensor:
    """Bool (T, T): True where output i has a nonzero gradient with respect to input j."""
    torch.manual_seed(0)
    x = torch.randn(1, T, attention.dims.d_model, requires_grad=True)
    pos = torch.arange(T)[None]  # (1, T)
    mask = AttentionMask.build(T, T, causal=stack.causal)
    ctx = AttentionContext(mask, stack.position, stack.position.prepare(pos, pos))
    out = attention(x, ctx)  # (1, T, d_model)
    rows = []
    for i in range(T):
        (grad,) = torch.autograd.grad(out[0, i].square().sum(), x, retain_graph=True)
        rows.append(grad[0].abs().sum(-1) > 0)  # (T,)
    return torch.stack(rows)


@pytest.mark.parametrize("family", ["decoder", "encoder"])
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_keep_mask_is_what_the_layer_attends_to(kind, family):
    spec = {**TINY, "family": family, "head": "lm" if family == "decoder" else "mlm"}
    spec["attention"] = {"kind": kind, **KINDS[kind]}
    model = archzoo.build_model(spec)
    stack = getattr(model, family)
    attention = stack.blocks[0].attention
    T = 64
    keep = attention.keep_mask(T, causal=stack.causal)
    assert keep.shape == (T, T) and keep.dtype == torch.bool
    assert torch.equal(keep, dependence(attention, stack, T) | torch.eye(T, dtype=torch.bool))
    if family == "decoder":
        assert not keep.triu(1).any()  # nothing from the future
    if kind != "mha":
        assert not keep.all()  # the pattern really is sparse at this length
