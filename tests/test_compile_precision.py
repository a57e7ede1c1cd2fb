"""torch.compile without graph breaks, bf16 autocast and activation checkpointing, per family."""

from __future__ import annotations

import pytest
import torch
from conftest import tiny

import archzoo

TINY = tiny(vocab_size=100, without=("max_len",))
FAMILIES = {
    "gpt2": {},
    "gpt2-rotary": {"position": "rotary"},
    "gpt2-alibi": {"position": "alibi"},
    "bert-base": {},
    "t5-small": {"head_dim": 8},
    "bart-base": {},
    "llama2-7b": {"attention.n_kv_heads": 2},
}


def tiny(name: str, **extra) -> archzoo.ZooModel:
    base = name.split("-rotary")[0].split("-alibi")[0]
    return archzoo.build_model(base, {**TINY, **FAMILIES[name], **extra})


def inputs(model: archzoo.ZooModel):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 100, (2, 16), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 11:] = 0
    extra = {"decoder_input_ids": ids[:, :8]} if model.family == "encoder-decoder" else {}
    return ids, mask, extra


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_compiles_with_fullgraph_and_matches_eager(name):
    model = tiny(name).eval()
    ids, mask, extra = inputs(model)
    torch._dynamo.reset()
    compiled = torch.compile(model, fullgraph=True, backend="eager")  # any graph break raises
    for m in (mask, None):
        got = compiled(ids, attention_mask=m, **extra).logits
        want = model(ids, attention_mask=m, **extra).logits
        torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_bf16_autocast_forward_and_backward(name):
    model = tiny(name)
    ids, mask, extra = inputs(model)
    labels = extra.get("decoder_input_ids", ids)
    with torch.no_grad():
        ref = model(ids, attention_mask=mask, labels=labels, **extra).loss
    linear_dtypes = set()
    hooks = [
        m.register_forward_hook(lambda _m, _i, o: linear_dtypes.add(o.dtype))
        for m in model.modules()
        if isinstance(m, torch.nn.Linear)
    ]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(ids, attention_mask=mask, labels=labels, **extra)
    for h in hooks:
        h.remove()
    out.loss.backward()
    assert linear_dtypes == {torch.bfloat16}  # every projection ran in bf16
    assert torch.isfinite(out.logits).all()
    assert abs(out.loss.item() - ref.item()) < 0.05 * ref.item()
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)


def saved_bytes(model: archzoo.ZooModel, ids: torch.Tensor) -> tuple[int, torch.Tensor]:
    """Bytes autograd keeps for backward during one forward, and the loss."""
    total = 0

    def pack(t: torch.Tensor) -> torch.Tensor:
        nonlocal total
        total += t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = model(ids, labels=ids).loss
    return total, loss


def test_activation_checkpointing_keeps_gradients_and_saves_memory():
    plain = tiny("gpt2", n_layers=4)
    ckpt = tiny("gpt2", n_layers=4, activation_checkpointing=True)
    ckpt.load_state_dict(plain.state_dict())
    ids = torch.randint(0, 100, (4, 64), generator=torch.Generator().manual_seed(1))
    plain_bytes, plain_loss = saved_bytes(plain, ids)
    ckpt_bytes, ckpt_loss = saved_bytes(ckpt, ids)
    plain_loss.backward()
    ckpt_loss.backward()
    assert ckpt_loss.item() == plain_loss.item()
    for (name, a), b in zip(plain.named_parameters(), ckpt.parameters(), strict=True):
        torch.testing.assert_close(a.grad, b.grad, atol=1e-6, rtol=1e-5, msg=name)
    assert ckpt_bytes < 0.5 * plain_bytes  # only block inputs are kept
