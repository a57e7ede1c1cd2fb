"""The attention/position contract: new forms against the built-ins, old forms through shims."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
import torch
from conftest import tiny
from torch import Tensor, nn

import archzoo
from archzoo import Registry, hookimpl, param
from archzoo.parts.interfaces import Attention, Position
from archzoo.plugins.attention.mha import MultiHeadAttention

TINY = tiny(without=("max_len",))


def registry_with(*classes: type) -> Registry:
    """The built-ins plus `classes`, registered as one throwaway plugin."""

    class Plugin:
        @hookimpl
        def archzoo_register(self, registrar: Any) -> None:
            for cls in classes:
                registrar.add_component(cls)

    reg = Registry(load_entry_points=False)
    info = reg.register_plugin(Plugin(), "contract-test")
    assert info.status == "ok", info.error
    return reg


def same_weights_logits(spec_a: dict, spec_b: dict, reg: Registry, **inputs: Any) -> tuple:
    """Logits of two specs that differ only in a component, with the same weights."""
    torch.manual_seed(0)
    a = archzoo.build_model("gpt2", spec_a, registry=reg).eval()
    b = archzoo.build_model("gpt2", spec_b, registry=reg).eval()
    b.load_state_dict(a.state_dict())
    ids = torch.randint(0, 50, (2, 9))
    with torch.no_grad():
        return a(ids, **inputs).logits, b(ids, **inputs).logits


def test_score_bias_receives_the_keys_the_attention_attends_to():
    """A content term q.k of the cached keys too: cached decoding equals the full forward."""

    class KeySeeing(Position):
        name = "key_seeing"
        summary = "test: bias = 50 * q . mean-over-heads(k) (needs the keys)"
        capabilities = archzoo.Capabilities(bias=True)

        def score_bias(self, state: Any, q: Tensor, k: Tensor, scale: float) -> Tensor:
            return 50.0 * scale * q @ k.mean(1, keepdim=True).transpose(-1, -2)  # (B, H, Tq, Tk)

    reg = registry_with(KeySeeing)
    torch.manual_seed(0)
    spec = {**TINY, "position": "key_seeing"}
    model = archzoo.build_model("gpt2", spec, registry=reg).eval()
    plain = archzoo.build_model("gpt2", {**spec, "position": "none"}, registry=reg).eval()
    plain.load_state_dict(model.state_dict())
    ids = torch.randint(0, 50, (2, 7))
    with torch.no_grad():
        full = model(ids).logits
        cache = model.new_cache(batch=2, capacity=7)
        steps = [model(ids[:, :4], cache=cache).logits]
        steps += [model(ids[:, i : i + 1], cache=cache).logits for i in (4, 5, 6)]
        assert (full - plain(ids).logits).abs().max() > 1e-3  # the bias is applied
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-4)


def test_position_base_stores_causal():
    enc = archzoo.build_model("gpt2", {**TINY, "family": "encoder", "head": "none"})
    dec = archzoo.build_model("gpt2", TINY)
    assert (enc.encoder.position.causal, dec.decoder.position.causal) == (False, True)


def test_attention_gets_the_spec_norm_factory():
    """An attention whose constructor takes make_norm gets the spec's norm, at any width."""

    class NormedQueries(MultiHeadAttention):
        name = "normed_queries"

        @dataclass
        class Config(MultiHeadAttention.Config):
            width: int = param(8, "width of the extra norm", min=1)

        def __init__(self, cfg: Any, dims: Any, *, make_norm: Any, cross: bool = False) -> None:
            super().__init__(cfg, dims, cross=cross)
            self.extra_norm: nn.Module = make_norm(dim=cfg.width)

    reg = registry_with(NormedQueries)
    spec = {**TINY, "norm": {"kind": "rmsnorm", "eps": 1e-3}, "attention": "normed_queries"}
    model = archzoo.build_model("gpt2", spec, registry=reg)
    norm = model.decoder.blocks[0].attention.extra_norm
    assert (norm.name, norm.cfg.eps, tuple(norm.weight.shape)) == ("rmsnorm", 1e-3, (8,))
    assert isinstance(model.decoder.blocks[0].attention, Attention)


# ---------------------------------------------------------------- masks: factors and shims


def reference_keep(q_len: int, k_len: int, causal: bool, pad: torch.Tensor | None) -> torch.Tensor:
    """(B or 1, Tq, Tk) by the definition: query i is key position k_len - q_len + i."""
    keep = torch.ones(1, q_len, k_len, dtype=torch.bool)
    for i in range(q_len):
        for j in range(k_len):
            if causal and j > k_len - q_len + i:
                keep[0, i, j] = False
    if pad is not None:
        keep = keep & pad.bool()[:, None, :]
    return keep


@pytest.mark.parametrize("q_len, k_len", [(5, 5), (2, 5), (1, 5)])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("padded", [False, True])
def test_mask_materialisations_follow_the_factors(q_len, k_len, causal, padded):
    from archzoo.parts.masks import AttentionMask

    pad = None
    if padded:
        pad = torch.ones(2, k_len, dtype=torch.long)
        pad[0, :3] = 0  # with causal and 2 queries of 5 keys, no row is empty; 5x5: rows 0-2
    mask = AttentionMask.build(q_len, k_len, causal=causal, key_padding=pad)
    assert (mask.causal, mask.q_offset) == (causal, k_len - q_len)
    ref = reference_keep(q_len, k_len, causal, pad)
    empty = ~ref.any(-1)  # (B or 1, Tq)
    allowed = mask.allowed()
    if not padded and not (causal and q_len > 1):  # one decoding query sees every key
        assert allowed is None and mask.dense() is None and mask.empty() is None
        assert mask.sdpa() == {"attn_mask": None, "is_causal": False}
        return
    assert torch.equal(allowed[:, 0], ref.expand_as(allowed[:, 0]))
    got_empty = mask.empty()
    if got_empty is None:
        assert not empty.any()
    else:
        assert torch.equal(got_empty[:, 0, :, 0], empty)
    dense = mask.dense()
    assert torch.equal(dense[:, 0], (ref | empty[..., None]).expand_as(dense[:, 0]))
    args = mask.sdpa()
    if causal and not padded and q_len == k_len:
        assert args == {"attn_mask": None, "is_causal": True}
    else:
        assert args["is_causal"] is False and torch.equal(args["attn_mask"], dense)


def test_mask_block_mask_matches_the_dense_keep():
    from archzoo.parts.masks import AttentionMask

    flex = pytest.importorskip("torch.nn.attention.flex_attention")
    pad = torch.ones(2, 20, dtype=torch.bool)
    pad[1, 15:] = False
    mask = AttentionMask.build(20, 20, causal=True, key_padding=pad)
    block = mask.block_mask(batch=2)
    assert mask.block_mask(batch=2) is block  # made once per mask (one forward)
    mod = mask.mask_mod()
    b, q, k = torch.meshgrid(torch.arange(2), torch.arange(20), torch.arange(20), indexing="ij")
    assert torch.equal(mod(b, None, q, k), mask.allowed()[:, 0])
    assert isinstance(block, flex.BlockMask)


def contract_templates() -> dict[str, type]:
    """The python blocks of docs/plugins.md's "Attention contract" section, executed."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "plugins.md").read_text()
    section = text[text.index("## Attention contract") : text.index("## 3. Zoo specs")]
    namespace: dict[str, Any] = {}
    for i, block in enumerate(re.findall(r"```python\n(.*?)```", section, re.S)):
        exec(compile(block, f"docs/plugins.md contract block {i}", "exec"), namespace)  # noqa: S102
    return namespace


def test_the_documented_templates_build_train_and_decode_with_the_cache():
    ns = contract_templates()
    reg = registry_with(ns["MyAttention"], ns["LearnedDistanceBias"])
    torch.manual_seed(0)
    spec = {
        **TINY,
        "norm": {"kind": "rmsnorm"},
        "position": "distance_bias",
        "attention": {"kind": "my_attention", "qk_norm": True},
    }
    model = archzoo.build_model("gpt2", spec, registry=reg)
    att = model.decoder.blocks[0].attention
    assert (att.q_norm.name, tuple(att.q_norm.weight.shape)) == ("rmsnorm", (8,))
    ids = torch.randint(0, 50, (2, 9))
    loss = model(ids, labels=ids).loss
    loss.backward()
    assert model.decoder.position.slope.grad.abs().sum() > 0  # the bias reaches the scores
    model.eval()
    pad = torch.ones(2, 9, dtype=torch.long)
    pad[1, :2] = 0  # left padding
    with torch.no_grad():
        full = model(ids, attention_mask=pad).logits
        cache = model.new_cache(batch=2, capacity=9)
        steps = [model(ids[:, :5], attention_mask=pad[:, :5], cache=cache).logits]
        for i in range(5, 9):
            steps.append(
                model(ids[:, i : i + 1], attention_mask=pad[:, : i + 1], cache=cache).logits
            )
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-4)
