"""Sparse token-table gradients while a head's loss makes the tied table's dense gradient.

A tied token table gets two gradients in one backward pass: the head's (dense, V x E) and the
lookup's. PyTorch's dense lookup gradient is a second V x E buffer (147 MiB for GPT-2 in
fp32) made at the very end of backward, while the head's is still held for the sum. When
the head's loss is computed from hidden states (`return_logits=False`), the head's dense
gradient is certain to arrive, so the lookups may return sparse (rows touched x E)
gradients: autograd adds them into the dense one in place, and `.grad` stays dense.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn


def tied_lookups(model: nn.Module, head: nn.Module) -> list[nn.Embedding]:
    """The model's nn.Embedding tables that are also a parameter of `head`."""
    head_params = {id(p) for p in head.parameters()}
    return [
        m
        for m in model.modules()
        if isinstance(m, nn.Embedding)
        and id(m.weight) in head_params
        and m.weight.requires_grad
        and m.max_norm is None
    ]


@contextmanager
def sparse_lookup_grads(tables: list[nn.Embedding]) -> Iterator[None]:
    """Within the block, these tables' lookups make sparse gradients (restored after)."""
    if not tables or torch.compiler.is_compiling() or not torch.is_grad_enabled():
        yield
        return
    before = [t.sparse for t in tables]
    for t in tables:
        t.sparse = True
    try:
        yield
    finally:
        for t, sparse in zip(tables, before, strict=True):
            t.sparse = sparse
