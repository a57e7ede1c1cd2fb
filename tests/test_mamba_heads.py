"""The mamba mixer with several heads (`heads`, Zamba's n_mamba_heads) against a token-by-token
recurrence written per head: each head reads its own d_inner / heads channels through its
own x_proj (dt, B, C) and dt_proj, and runs Mamba's selective scan on them alone.

Chunked prefill and cached decoding equal that loop (<= 1e-5 in float32), padding never
reaches the state, the layer builds on meta with the per-head parameter count, and it runs
under torch.compile(fullgraph=True) as the other mixers do (tests/test_mixer_compile.py).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import tiny
from test_mixer_compile import new_cache, run
from test_recurrent_mixers import (
    BASE,
    D,
    assert_cached_decoding_equals_full,
    assert_chunked_equals_reference,
    assert_padding_never_reaches_the_state,
    conv_reference,
)
from torch import Tensor

import archzoo

H, P, N, R = 3, 16, 4, 3  # heads of P channels (d_inner 48), state N, step rank R
HEADS = {"kind": "mamba", "d_inner": H * P, "state_size": N, "dt_rank": R, "chunk_size": 4}


def spec(**extra) -> dict:
    return {**tiny(n_layers=1), **BASE, "attention": {**HEADS, "heads": H, **extra}}


def mixer(**extra) -> torch.nn.Module:
    """The three-head mixer of a one-layer decoder, every weight perturbed off its init."""
    torch.manual_seed(0)
    m = archzoo.build_model(spec(**extra)).decoder.blocks[0].attention
    with torch.no_grad():
        for p in m.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return m.eval()


def heads_reference(m, x: Tensor) -> Tensor:
    """Per head h over channels hP..(h+1)P: [dt | B | C] = W_x[h] x_h, dt = softplus(W_dt[h]
    dt + b[h]); s_t = exp(dt_t A_h) * s_{t-1} + dt_t x_t B_t per channel, y_t = s_t C_t +
    D_h x_t; the heads' y side by side, times silu(z), then the output projection."""
    B, T, _ = x.shape
    xs, z = m.in_proj(x).chunk(2, dim=-1)
    xs = F.silu(conv_reference(xs, m.conv.weight, m.conv.bias))  # (B, T, H P)
    ys = []
    for h in range(H):
        xh = xs[..., h * P : (h + 1) * P]  # (B, T, P)
        dt, b, c = (xh @ m.x_proj.weight[h].T).split([R, N, N], dim=-1)
        dt = F.softplus(dt @ m.dt_proj.weight[h].T + m.dt_proj.bias[h])  # (B, T, P)
        A = -m.A_log[h].exp()  # (P, N)
        s = torch.zeros(B, P, N)
        y = torch.zeros(B, T, P)
        for t in range(T):
            s = (
                torch.exp(dt[:, t, :, None] * A) * s
                + dt[:, t, :, None] * xh[:, t, :, None] * b[:, t, None, :]
            )
            y[:, t] = (s * c[:, t, None, :]).sum(-1) + m.D[h] * xh[:, t]
        ys.append(y)
    return m.out_proj(torch.cat(ys, dim=-1) * F.silu(z))


def test_chunked_prefill_equals_the_per_head_recurrence() -> None:
    assert_chunked_equals_reference(mixer(), heads_reference)


def test_one_head_is_the_plain_mamba_mixer() -> None:
    """heads: 1 keeps Mamba's own layout (one x_proj and dt_proj over all channels)."""
    torch.manual_seed(0)
    m = archzoo.build_model({**spec(), "attention": HEADS}).decoder.blocks[0].attention
    assert tuple(m.x_proj.weight.shape) == (R + 2 * N, H * P)
    assert tuple(m.A_log.shape) == (H * P, N)


def test_cached_decoding_equals_the_full_forward_with_left_padding() -> None:
    assert_cached_decoding_equals_full(mixer())


def test_padding_never_reaches_the_state() -> None:
    assert_padding_never_reaches_the_state(mixer())


def test_meta_build_counts_the_per_head_parameters() -> None:
    """in_proj (x, z), conv with bias, per head x_proj (P -> R + 2N) and dt_proj (R -> P, with
    bias), A_log, D, out_proj."""
    model = archzoo.build_model(spec(), device="meta")
    m = model.decoder.blocks[0].attention
    assert all(p.device.type == "meta" for p in m.parameters())
    want = D * 96 + 48 * 5 + H * P * (R + 2 * N) + H * (R * P + P) + 48 * N + 48 + 48 * D
    assert sum(p.numel() for p in m.parameters()) == want


def test_heads_must_divide_the_channels() -> None:
    with pytest.raises(archzoo.SpecError) as err:
        archzoo.build_model(spec(heads=5))
    assert "attention.heads: 5 does not divide d_inner 48" in str(err.value)


def test_compiles_with_fullgraph_and_equals_eager() -> None:
    """A left-padded chunked prefill and one step, compiled whole: outputs and states equal."""
    m = mixer()
    x = torch.randn(2, 10, D, generator=torch.Generator().manual_seed(1))
    pad = torch.ones(2, 10, dtype=torch.bool)
    pad[1, :3] = False
    eager = run(m, x, pad, new_cache(m))
    torch._dynamo.reset()
    compiled = torch.compile(m, fullgraph=True, dynamic=False, backend="aot_eager")
    got = run(compiled, x, pad, new_cache(m))
    assert len(got) == len(eager)
    for g, e in zip(got, eager, strict=True):
        assert g.shape == e.shape
        assert (g - e).abs().max() <= 1e-5
