"""The attention/position contract: new forms against the built-ins, old forms through shims."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import pytest
import torch
from torch import Tensor, nn

import archzoo
from archzoo import Registry, hookimpl, param
from archzoo.interfaces import Attention, Position
from archzoo.plugins.attention.mha import MultiHeadAttention
from archzoo.plugins.position.alibi import AlibiPosition

TINY = {"n_layers": 2, "d_model": 32, "n_heads": 4, "d_ff": 64, "vocab_size": 50, "dropout": 0.0}


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


def test_old_score_bias_signature_warns_and_gives_alibi_numbers():
    with pytest.warns(DeprecationWarning, match=r"define score_bias\(state, q, k, scale\)"):

        class OldAlibi(AlibiPosition):
            name = "old_alibi"

            def score_bias(self, state: Any, q: Tensor, scale: float) -> Tensor:
                return state

    reg = registry_with(OldAlibi)
    mask = torch.ones(2, 9, dtype=torch.long)
    mask[0, :3] = 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the shim warns at class creation, not per call
        new, old = same_weights_logits(
            {**TINY, "position": "alibi"},
            {**TINY, "position": "old_alibi"},
            reg,
            attention_mask=mask,
        )
    assert torch.equal(new, old)


def test_old_score_bias_call_form_warns_and_returns_the_same_bias():
    torch.manual_seed(0)
    model = archzoo.build_model("gpt2", {**TINY, "position": "t5_relative"})
    pos = model.decoder.position
    p = torch.arange(6)[None]
    state = pos.prepare(p, p)
    q, k = torch.randn(1, 4, 6, 8), torch.randn(1, 4, 6, 8)
    new = pos.score_bias(state, q, k, 0.125)
    with pytest.warns(DeprecationWarning, match=r"call score_bias\(state, q, k, scale\)"):
        old = pos.score_bias(state, q, 0.125)
    assert new.shape == (1, 4, 6, 6)
    assert torch.equal(old, new)


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


def test_legacy_needs_probs_position_gives_the_shaw_value_term_numbers():
    from archzoo.plugins.position.relative import RelativePosition

    with pytest.warns(DeprecationWarning, match=r"Capabilities\(values=True\)"):

        class OldShaw(RelativePosition):
            name = "old_shaw"

            @property
            def needs_probs(self) -> bool:
                return self.value_table is not None

    reg = registry_with(OldShaw)
    pos = {"max_distance": 3, "value_term": True}
    new, old = same_weights_logits(
        {**TINY, "position": {"kind": "relative", **pos}},
        {**TINY, "position": {"kind": "old_shaw", **pos}},
        reg,
    )
    assert torch.equal(new, old)
    model = archzoo.build_model("gpt2", {**TINY, "position": {"kind": "relative", **pos}})
    assert model.decoder.position.capabilities.values
    assert not archzoo.build_model(
        "gpt2", {**TINY, "position": "relative"}
    ).decoder.position.needs_probs


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
