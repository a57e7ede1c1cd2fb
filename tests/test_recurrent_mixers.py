"""The recurrent mixers (gated_deltanet, mamba2, short_conv, mamba) against their papers' recurrences.

Each reference below runs the layer one token at a time from the published formula with the
module's own weights, in plain loops: chunked prefill must equal it (<= 1e-5 in float32),
and so must decoding token by token through the state cache, with or without left padding.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import tiny
from torch import Tensor

import archzoo
from archzoo.parts.cache import StateCache
from archzoo.parts.interfaces import AttentionContext
from archzoo.parts.masks import AttentionMask

D = 32
BASE = {"name": "mixer", "family": "decoder", "position": "none", "head": "lm"}
MIXERS = {  # small chunks, so a 13-token prompt spans several chunks and a remainder
    "gated_deltanet": {
        "n_k_heads": 2,
        "n_v_heads": 4,
        "head_k_dim": 8,
        "head_v_dim": 6,
        "chunk_size": 4,
        "beta_scale": 2.0,  # OLMo Hybrid's: b in (0, 2)
    },
    "mamba2": {"d_inner": 48, "head_dim": 12, "state_size": 8, "n_groups": 2, "chunk_size": 4},
    "short_conv": {},
    "mamba": {"d_inner": 48, "state_size": 4, "dt_rank": 3, "inner_norms": True, "chunk_size": 4},
}


def mixer(name: str) -> torch.nn.Module:
    """The mixer of a one-layer tiny decoder, with perturbed weights (nothing at its init)."""
    torch.manual_seed(0)
    spec = {**tiny(n_layers=1), **BASE, "attention": {"kind": name, **MIXERS[name]}}
    model = archzoo.build_model(spec)
    m = model.decoder.blocks[0].attention
    with torch.no_grad():
        for p in m.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return m.eval()


def conv_reference(x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    """y_t = sum_j w_j x_{t-K+1+j} (+ b), zeros before the first token. x (B, T, C)."""
    B, T, C = x.shape
    K = weight.shape[-1]
    y = torch.zeros(B, T, C) if bias is None else bias.expand(B, T, C).clone()
    for t in range(T):
        for j in range(K):
            s = t - K + 1 + j
            if s >= 0:
                y[:, t] += weight[:, 0, j] * x[:, s]
    return y


def rms(x: Tensor, eps: float) -> Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def gated_deltanet_reference(m, x: Tensor) -> Tensor:
    """Yang et al. (2024): S_t = a_t S_{t-1}; S_t += b_t k_t (v_t - S_t^T k_t)^T; o_t = S_t^T q_t."""
    B, T, _ = x.shape
    hk, hv, dk, dv = m.n_k, m.n_v, m.dk, m.dv
    qkv = F.silu(conv_reference(m.in_proj_qkv(x), m.conv.weight, None))
    q, k, v = qkv.split([hk * dk, hk * dk, hv * dv], dim=-1)
    q = q.view(B, T, hk, dk).repeat_interleave(hv // hk, dim=2)  # (B, T, Hv, dk)
    k = k.view(B, T, hk, dk).repeat_interleave(hv // hk, dim=2)
    v = v.view(B, T, hv, dv)
    q = q / (q.pow(2).sum(-1, keepdim=True) + 1e-6).sqrt() / dk**0.5
    k = k / (k.pow(2).sum(-1, keepdim=True) + 1e-6).sqrt()
    beta = torch.sigmoid(m.in_proj_b(x)) * m.cfg.beta_scale  # (B, T, Hv)
    a = torch.exp(-m.A_log.exp() * F.softplus(m.in_proj_a(x) + m.dt_bias))
    S = torch.zeros(B, hv, dk, dv)
    out = torch.zeros(B, T, hv, dv)
    for t in range(T):
        for h in range(hv):
            kt, qt = k[:, t, h], q[:, t, h]  # (B, dk)
            S[:, h] = a[:, t, h, None, None] * S[:, h]
            err = v[:, t, h] - torch.einsum("bkv,bk->bv", S[:, h], kt)
            S[:, h] = S[:, h] + beta[:, t, h, None, None] * kt[:, :, None] * err[:, None, :]
            out[:, t, h] = torch.einsum("bkv,bk->bv", S[:, h], qt)
    z = m.in_proj_z(x).view(B, T, hv, dv)
    out = m.norm.weight * rms(out, m.cfg.norm_eps) * F.silu(z)
    return m.out_proj(out.reshape(B, T, hv * dv))


def mamba2_reference(m, x: Tensor) -> Tensor:
    """Dao and Gu (2024): h_t = exp(dt_t A) h_{t-1} + dt_t x_t B_t^T; y_t = h_t C_t + D x_t."""
    B, T, _ = x.shape
    H, P, N, G = m.n_heads, m.cfg.head_dim, m.cfg.state_size, m.cfg.n_groups
    z, xbc, dt = m.in_proj(x).split([m.d_inner, m.conv_dim, H], dim=-1)
    xbc = F.silu(conv_reference(xbc, m.conv.weight, m.conv.bias))
    xs, b, c = xbc.split([m.d_inner, G * N, G * N], dim=-1)
    xs = xs.view(B, T, H, P)
    b, c = b.view(B, T, G, N), c.view(B, T, G, N)
    dt = F.softplus(dt + m.dt_bias)  # (B, T, H)
    A = -m.A_log.exp()
    h = torch.zeros(B, H, P, N)
    y = torch.zeros(B, T, H, P)
    for t in range(T):
        for i in range(H):
            g = i // (H // G)  # consecutive heads share a group's B and C
            h[:, i] = (
                torch.exp(dt[:, t, i] * A[i])[:, None, None] * h[:, i]
                + dt[:, t, i, None, None] * xs[:, t, i, :, None] * b[:, t, g, None, :]
            )
            y[:, t, i] = (h[:, i] * c[:, t, g, None, :]).sum(-1) + m.D[i] * xs[:, t, i]
    y = y.reshape(B, T, H * P) * F.silu(z)
    group = m.d_inner // G
    y = rms(y.view(B, T, G, group), m.cfg.norm_eps).view(B, T, H * P)
    return m.out_proj(m.norm.weight * y)


def short_conv_reference(m, x: Tensor) -> Tensor:
    """LFM2: y = c * conv(b * x), then the output projection."""
    b, c, h = m.in_proj(x).chunk(3, dim=-1)
    return m.out_proj(c * conv_reference(b * h, m.conv.weight, m.conv.bias))


def mamba_reference(m, x: Tensor) -> Tensor:
    """Gu and Dao (2023): h_t = exp(dt_t A) * h_{t-1} + dt_t x_t B_t per channel,
    y_t = h_t C_t + D x_t, times silu(z) (Jamba: dt, B and C RMS-normalised first)."""
    B, T, _ = x.shape
    inner, N, eps = m.d_inner, m.cfg.state_size, m.cfg.norm_eps
    xs, z = m.in_proj(x).chunk(2, dim=-1)
    xs = F.silu(conv_reference(xs, m.conv.weight, m.conv.bias))  # (B, T, I)
    dt, b, c = m.x_proj(xs).split([m.rank, N, N], dim=-1)
    dt, b, c = m.dt_norm * rms(dt, eps), m.b_norm * rms(b, eps), m.c_norm * rms(c, eps)
    dt = F.softplus(m.dt_proj(dt))  # (B, T, I)
    A = -m.A_log.exp()  # (I, N)
    h = torch.zeros(B, inner, N)
    y = torch.zeros(B, T, inner)
    for t in range(T):
        h = (
            torch.exp(dt[:, t, :, None] * A) * h
            + dt[:, t, :, None] * xs[:, t, :, None] * b[:, t, None, :]
        )
        y[:, t] = (h * c[:, t, None, :]).sum(-1) + m.D * xs[:, t]
    return m.out_proj(y * F.silu(z))


REFERENCES = {
    "gated_deltanet": gated_deltanet_reference,
    "mamba2": mamba2_reference,
    "short_conv": short_conv_reference,
    "mamba": mamba_reference,
}


def context(q_len: int, k_len: int, padding: Tensor | None = None, cache=None) -> AttentionContext:
    mask = AttentionMask.build(q_len, k_len, causal=True, key_padding=padding)
    return AttentionContext(mask, cache=cache)


def assert_chunked_equals_reference(m: torch.nn.Module, reference) -> None:
    """A 13-token prefill (several chunks and a remainder) equals the token-by-token loop."""
    x = torch.randn(2, 13, D, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        got = m(x, context(13, 13))
        want = reference(m, x)
    assert got.shape == (2, 13, D)
    assert (got - want).abs().max() <= 1e-5


def assert_cached_decoding_equals_full(m: torch.nn.Module) -> None:
    """A 9-token prompt (row 1 left-padded by 3) then 6 single-token steps through the state
    cache equal one forward over all 15 tokens; the padded row equals its unpadded self."""
    x = torch.randn(2, 15, D, generator=torch.Generator().manual_seed(2))
    pad = torch.ones(2, 15, dtype=torch.bool)
    pad[1, :3] = False
    cache = StateCache(m.state_shapes(), 2, dtype=torch.float32, device=torch.device("cpu"))
    with torch.no_grad():
        full = m(x, context(15, 15, pad))
        steps = [m(x[:, :9], context(9, 9, pad[:, :9], cache))]
        for t in range(9, 15):
            steps.append(m(x[:, t : t + 1], context(1, t + 1, pad[:, : t + 1], cache)))
        alone = m(x[1:, 3:], context(12, 12))  # row 1 without its padding
    stepped = torch.cat(steps, dim=1)
    assert (stepped - full)[pad].abs().max() <= 1e-5
    assert (full[1, 3:] - alone[0]).abs().max() <= 1e-5


def assert_padding_never_reaches_the_state(m: torch.nn.Module) -> None:
    """Whatever the padded positions hold, the state after the prompt is the same."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(1, 8, D, generator=g)
    pad = torch.ones(1, 8, dtype=torch.bool)
    pad[0, :4] = False
    states = []
    for noise in (0.0, 100.0):
        cache = StateCache(m.state_shapes(), 1, dtype=torch.float32, device=torch.device("cpu"))
        y = x.clone()
        y[0, :4] += noise * torch.randn(4, D, generator=g)
        with torch.no_grad():
            m(y, context(8, 8, pad, cache))
        states.append(cache.tensors)
    for key in states[0]:
        assert torch.equal(states[0][key], states[1][key]), key


@pytest.mark.parametrize("name", sorted(MIXERS))
def test_chunked_prefill_equals_the_token_by_token_recurrence(name: str) -> None:
    assert_chunked_equals_reference(mixer(name), REFERENCES[name])


@pytest.mark.parametrize("name", sorted(MIXERS))
def test_cached_decoding_equals_the_full_forward_with_left_padding(name: str) -> None:
    assert_cached_decoding_equals_full(mixer(name))


@pytest.mark.parametrize("name", sorted(MIXERS))
def test_padding_never_reaches_the_state(name: str) -> None:
    assert_padding_never_reaches_the_state(mixer(name))


def test_meta_builds_count_the_papers_parameters() -> None:
    """On meta, every mixer's parameters are the sum of its projections, conv and per-head terms."""
    counts = {
        # qkv (q, k: 2 heads of 8; v: 4 of 6), z, b, a, conv, A_log, dt_bias, norm, out
        "gated_deltanet": D * 56 + D * 24 + 2 * D * 4 + 56 * 4 + 2 * 4 + 6 + 24 * D,
        # in_proj (z, x, B, C, dt), conv with bias, A_log, dt_bias, D, norm, out
        "mamba2": D * (48 + 80 + 4) + 80 * 5 + 3 * 4 + 48 + 48 * D,
        "short_conv": D * 3 * D + D * 3 + D * D,
        # in_proj (x, z), conv with bias, x_proj (dt, B, C), dt_proj with bias, A_log, D,
        # the dt/B/C norms, out
        "mamba": D * 96 + 48 * 5 + 48 * 11 + 3 * 48 + 48 + 48 * 4 + 48 + 11 + 48 * D,
    }
    for name, want in counts.items():
        spec = {**tiny(n_layers=1), **BASE, "attention": {"kind": name, **MIXERS[name]}}
        model = archzoo.build_model(spec, device="meta")
        m = model.decoder.blocks[0].attention
        assert all(p.device.type == "meta" for p in m.parameters())
        assert sum(p.numel() for p in m.parameters()) == want, name


def test_hybrid_model_compiles_with_fullgraph() -> None:
    """A four-layer stack of all four mixers, with a padded row, traced
    whole by torch.compile (any graph break raises) and equal to eager."""
    torch.manual_seed(0)
    layers = [{"select": [i], "attention": {"kind": n, **MIXERS[n]}} for i, n in enumerate(MIXERS)]
    spec = {**tiny(n_layers=4), **BASE, "layers": layers}
    model = archzoo.build_model(spec).eval()
    ids = torch.randint(0, 50, (2, 10))
    mask = torch.ones_like(ids)
    mask[1, :2] = 0
    with torch.no_grad():
        eager = model(ids, attention_mask=mask).logits
        compiled = torch.compile(model, fullgraph=True, backend="eager")
        got = compiled(ids, attention_mask=mask).logits
    assert (got - eager).abs().max() <= 1e-6
