"""Optional mixer kernels (flash-linear-attention, causal-conv1d, mamba-ssm) through the registry.

None of the libraries is installed here, so each test stands in for them: the CPU path must
run plain PyTorch and say why in the debug log; with the device hook saying "on the
kernel's device" and a fake library injected into sys.modules, the layer must call it, and
its outputs (prefill, then one cached step) must equal the plain-PyTorch path. Each fake is
an independent token-by-token reference written in the library's own layout (tokens before
heads, mamba-ssm's (P, N) state), so the adapters' layout changes are checked too.
"""

from __future__ import annotations

import logging
import sys
import types

import pytest
import torch
import torch.nn.functional as F
from conftest import tiny

import archzoo
from archzoo.parts import mixer_kernels
from archzoo.parts.cache import StateCache
from archzoo.parts.interfaces import AttentionContext
from archzoo.parts.masks import AttentionMask
from archzoo.parts.registry import RegistryError

D = 32
MIXERS = {
    "gated_deltanet": {"n_k_heads": 2, "n_v_heads": 4, "head_k_dim": 8, "chunk_size": 4},
    "mamba2": {"d_inner": 48, "head_dim": 12, "state_size": 8, "n_groups": 2, "chunk_size": 4},
}


@pytest.fixture(autouse=True)
def fresh_libraries():
    """load_library remembers each import; every test starts and ends without memory."""
    mixer_kernels.load_library.cache_clear()
    yield
    mixer_kernels.load_library.cache_clear()


def model(name: str) -> archzoo.ZooModel:
    torch.manual_seed(0)
    spec = {**tiny(n_layers=1), "family": "decoder", "position": "none", "head": "lm"}
    m = archzoo.build_model({**spec, "attention": {"kind": name, **MIXERS[name]}}).eval()
    with torch.no_grad():
        for p in m.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return m


def prefill_and_step(layer) -> list[torch.Tensor]:
    """A 9-token prompt (row 1 left-padded by 2), then one cached step: outputs and state."""
    x = torch.randn(2, 10, D, generator=torch.Generator().manual_seed(1))
    pad = torch.ones(2, 10, dtype=torch.bool)
    pad[1, :2] = False
    cache = StateCache(layer.state_shapes(), 2, dtype=torch.float32, device=torch.device("cpu"))
    with torch.no_grad():
        a = layer(x[:, :9], AttentionContext(AttentionMask.build(9, 9, causal=True,
                  key_padding=pad[:, :9]), cache=cache))  # fmt: skip
        b = layer(x[:, 9:], AttentionContext(AttentionMask.build(1, 10, causal=True,
                  key_padding=pad), cache=cache))  # fmt: skip
    return [a[pad[:, :9]], b, *cache.tensors.values()]


def fake_causal_conv1d(calls: list[str]) -> types.ModuleType:
    def causal_conv1d_fn(x, weight, bias=None):  # x (B, C, L), weight (C, K)
        calls.append("conv")
        K = weight.shape[-1]
        return F.conv1d(x, weight[:, None], bias, padding=K - 1, groups=x.shape[1])[
            ..., : x.shape[2]
        ]

    return types.SimpleNamespace(causal_conv1d_fn=causal_conv1d_fn, __name__="causal_conv1d")


def fake_fla(calls: list[str]) -> types.ModuleType:
    """S_t = a_t S_{t-1} + b_t k_t (v_t - S_{t-1}^T k_t a_t)^T, o_t = S_t^T (scale q_t),
    tokens before heads, as FLA's gated delta rule."""

    def rule(which):
        def run(q, k, v, g, beta, scale, initial_state, output_final_state):
            calls.append(which)
            S = initial_state.clone()  # (B, H, dk, dv)
            out = []
            for t in range(q.shape[1]):
                S = S * g[:, t, :, None, None].exp()
                err = v[:, t] - torch.einsum("bhkv,bhk->bhv", S, k[:, t])
                S = S + beta[:, t, :, None, None] * k[:, t, :, :, None] * err[:, :, None]
                out.append(torch.einsum("bhkv,bhk->bhv", S, q[:, t] * scale))
            return torch.stack(out, 1), S  # (B, T, H, dv)

        return run

    return types.SimpleNamespace(
        chunk_gated_delta_rule=rule("chunk"), fused_recurrent_gated_delta_rule=rule("recurrent")
    )


def fake_mamba_ssm(calls: list[str], monkeypatch) -> None:
    """SSD token by token in mamba-ssm's layout: state (B, H, P, N), B and C per group."""

    def per_head(t, H):  # (B, G, N) -> (B, H, N)
        return t.repeat_interleave(H // t.shape[1], dim=1)

    def mamba_chunk_scan_combined(x, dt, A, B, C, chunk, initial_states, return_final_states):
        calls.append("chunk")
        h, ys = initial_states.clone(), []
        for t in range(x.shape[1]):
            d = dt[:, t, :, None, None]  # (B, H, 1, 1)
            h = (d * A[:, None, None]).exp() * h + d * x[:, t, ..., None] * per_head(
                B[:, t], x.shape[2]
            )[:, :, None]
            ys.append((h * per_head(C[:, t], x.shape[2])[:, :, None]).sum(-1))
        return torch.stack(ys, 1), h

    def selective_state_update(state, x, dt, A, B, C):
        calls.append("step")
        H = x.shape[1]
        state.copy_(
            (dt[..., None] * A).exp() * state + (dt * x)[..., None] * per_head(B, H)[:, :, None]
        )
        return (state * per_head(C, H)[:, :, None]).sum(-1)

    root = types.ModuleType("mamba_ssm")
    for name, fn in (
        ("ssd_combined", mamba_chunk_scan_combined),
        ("selective_state_update", selective_state_update),
    ):
        module = types.ModuleType(f"mamba_ssm.ops.triton.{name}")
        setattr(module, fn.__name__, fn)
        monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setitem(sys.modules, "mamba_ssm", root)


def test_on_cpu_the_plain_pytorch_path_runs_and_the_debug_log_says_why(caplog):
    m = model("gated_deltanet")
    with caplog.at_level(logging.DEBUG, logger="archzoo.parts.kernels"):
        got = prefill_and_step(m.decoder.blocks[0].attention)
    for kernel, op in (
        ("fla_gated_delta_rule", "gated_delta_rule"),
        ("causal_conv1d", "causal_conv"),
    ):
        assert (
            f"mixer kernel {kernel!r} cannot serve this {op} (tensors on cpu, it runs on cuda): "
            "plain PyTorch" in caplog.text
        )
    want = prefill_and_step(m.set_mixer_impl("torch").decoder.blocks[0].attention)
    assert all(torch.equal(g, w) for g, w in zip(got, want, strict=True))


def test_a_library_that_does_not_import_falls_back_with_the_reason(monkeypatch, caplog):
    monkeypatch.setattr(mixer_kernels, "on_kernel_device", lambda kernel, t: True)
    monkeypatch.setitem(sys.modules, "fla.ops.gated_delta_rule", None)  # import fails
    monkeypatch.setitem(sys.modules, "causal_conv1d", None)
    m = model("gated_deltanet")
    with caplog.at_level(logging.DEBUG, logger="archzoo.parts.kernels"):
        got = prefill_and_step(m.decoder.blocks[0].attention)
    assert "mixer kernel 'fla_gated_delta_rule' cannot serve this gated_delta_rule " in caplog.text
    assert "(fla.ops.gated_delta_rule cannot be imported (ModuleNotFoundError:" in caplog.text
    want = prefill_and_step(m.set_mixer_impl("torch").decoder.blocks[0].attention)
    assert all(torch.equal(g, w) for g, w in zip(got, want, strict=True))


def test_gated_deltanet_calls_fla_and_causal_conv1d_when_available(monkeypatch):
    calls: list[str] = []
    monkeypatch.setattr(mixer_kernels, "on_kernel_device", lambda kernel, t: True)
    monkeypatch.setitem(sys.modules, "fla.ops.gated_delta_rule", fake_fla(calls))
    monkeypatch.setitem(sys.modules, "causal_conv1d", fake_causal_conv1d(calls))
    m = model("gated_deltanet")
    got = prefill_and_step(m.decoder.blocks[0].attention)
    assert calls == ["conv", "chunk", "conv", "recurrent"]
    want = prefill_and_step(m.set_mixer_impl("torch").decoder.blocks[0].attention)
    assert calls == ["conv", "chunk", "conv", "recurrent"]  # "torch": no library call
    for g, w in zip(got, want, strict=True):
        assert (g - w).abs().max() <= 1e-5
    calls.clear()  # one kernel named: that kernel only, plain PyTorch for the other op
    prefill_and_step(m.set_mixer_impl("causal_conv1d").decoder.blocks[0].attention)
    assert calls == ["conv", "conv"]


def test_mamba2_calls_mamba_ssm_when_available(monkeypatch):
    calls: list[str] = []
    monkeypatch.setattr(mixer_kernels, "on_kernel_device", lambda kernel, t: True)
    monkeypatch.setitem(sys.modules, "causal_conv1d", None)  # this one missing: PyTorch conv
    fake_mamba_ssm(calls, monkeypatch)
    m = model("mamba2")
    got = prefill_and_step(m.decoder.blocks[0].attention)
    assert calls == ["chunk", "step"]
    want = prefill_and_step(m.set_mixer_impl("torch").decoder.blocks[0].attention)
    for g, w in zip(got, want, strict=True):
        assert (g - w).abs().max() <= 1e-5


def test_packed_rows_are_refused_by_the_kernels(monkeypatch, caplog):
    calls: list[str] = []
    monkeypatch.setattr(mixer_kernels, "on_kernel_device", lambda kernel, t: True)
    monkeypatch.setitem(sys.modules, "fla.ops.gated_delta_rule", fake_fla(calls))
    monkeypatch.setitem(sys.modules, "causal_conv1d", fake_causal_conv1d(calls))
    m = model("gated_deltanet")
    ids = torch.randint(0, 50, (1, 8))
    docs = torch.tensor([[0, 0, 0, 1, 1, 1, 1, 1]])
    with torch.no_grad(), caplog.at_level(logging.DEBUG, logger="archzoo.parts.kernels"):
        m(ids, document_ids=docs)
    assert calls == []
    assert "(document ids (packed rows) restart the state): plain PyTorch" in caplog.text


def test_mixer_impl_names_are_checked_and_listed():
    names = archzoo.list_mixer_impls()
    assert names[:2] == ["auto", "torch"]
    assert {"causal_conv1d", "fla_gated_delta_rule", "mamba_ssm_ssd"} <= set(names)
    m = model("mamba2")
    with pytest.raises(
        RegistryError, match="unknown mixer_impl 'flash'; choose one of: auto, torch"
    ):
        m.set_mixer_impl("flash")
    assert {"fla", "causal_conv1d", "mamba_ssm"}.isdisjoint(  # nothing imported at import time
        name.split(".")[0] for name in sys.modules if sys.modules[name] is not None
    )
