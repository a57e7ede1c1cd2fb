"""Positions against their papers: sinusoidal formula, ALiBi slopes, rotary as complex numbers."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import tiny
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

import archzoo
from archzoo.plugins.position.alibi import alibi_slopes, alibi_slopes_fp32
from archzoo.plugins.position.rotary import apply_rotary, rotary_angles
from archzoo.plugins.position.sinusoidal import sinusoidal_table

TINY = tiny(n_layers=1, vocab_size=100)


def paper_pe(pos: int, feature: int, d: int, base: float = 10000.0) -> float:
    """Vaswani et al. sec. 3.5, one entry, float64: sin on even features, cos on odd ones."""
    i = feature // 2
    angle = pos / base ** (2 * i / d)
    return math.sin(angle) if feature % 2 == 0 else math.cos(angle)


def capture_output(module: torch.nn.Module) -> tuple[list, torch.utils.hooks.RemovableHandle]:
    """Record what `module` returns on each call."""
    seen: list = []
    handle = module.register_forward_hook(lambda mod, args, out: seen.append(out))
    return seen, handle


# --- sinusoidal -------------------------------------------------------------------------


@pytest.mark.parametrize("d", [8, 32])
def test_sinusoidal_table_equals_paper_formula(d):
    positions = [0, 1, 2, 7, 31, 63]
    table = sinusoidal_table(torch.tensor(positions), d)  # (P, d)
    assert table.shape == (len(positions), d)
    for row, pos in enumerate(positions):
        for feature in range(d):
            expected = paper_pe(pos, feature, d)
            assert abs(table[row, feature].item() - expected) < 2e-5, (pos, feature)


def test_sinusoidal_table_custom_base():
    table = sinusoidal_table(torch.tensor([5]), 16, base=500.0)
    expected = [paper_pe(5, f, 16, base=500.0) for f in range(16)]
    torch.testing.assert_close(table[0], torch.tensor(expected), atol=1e-6, rtol=0)


@pytest.mark.parametrize("offset", [0, 57])
def test_sinusoidal_model_embedding_is_token_plus_table(offset):
    model = archzoo.build_model("gpt2", {**TINY, "position": "sinusoidal", "head": "none"}).eval()
    stack = model.decoder
    ids = torch.tensor([[3, 14, 15, 92, 65, 35]])
    T = ids.shape[1]
    seen, handle = capture_output(stack.embedding)
    with torch.no_grad():
        model(ids, position_ids=torch.arange(offset, offset + T)[None])
    handle.remove()
    table = torch.tensor(
        [[paper_pe(offset + t, f, 32) for f in range(32)] for t in range(T)], dtype=torch.float32
    )
    expected = stack.embedding.word.weight[ids[0]] + table
    torch.testing.assert_close(seen[0][0], expected, atol=2e-5, rtol=0)


# --- ALiBi slopes -----------------------------------------------------------------------


def test_alibi_slopes_8_heads():
    expected = [1 / 2, 1 / 4, 1 / 8, 1 / 16, 1 / 32, 1 / 64, 1 / 128, 1 / 256]
    assert alibi_slopes(8) == pytest.approx(expected, rel=1e-12)


def test_alibi_slopes_12_heads_follow_press_recipe():
    # 8 heads: 2^-1 .. 2^-8; 16 heads: 2^-0.5, 2^-1, ..., 2^-8; take every other of the 16-head
    # slopes (2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5, ...) and keep the first 12 - 8 = 4.
    expected = [2.0**-k for k in range(1, 9)] + [2.0**-0.5, 2.0**-1.5, 2.0**-2.5, 2.0**-3.5]
    assert alibi_slopes(12) == pytest.approx(expected, rel=1e-12)


def test_alibi_slopes_4_and_16_heads():
    assert alibi_slopes(4) == pytest.approx([1 / 4, 1 / 16, 1 / 64, 1 / 256], rel=1e-12)
    assert alibi_slopes(16) == pytest.approx([2.0 ** (-k / 2) for k in range(1, 17)], rel=1e-12)


@pytest.mark.parametrize("n_heads", [6, 16, 112])
def test_alibi_slopes_fp32_are_blooms_bits(n_heads):
    """The `key` form's slopes are raised in float32 as BLOOM raises them: its bf16 bias
    slope * j over 2048 keys has every bit, where float64-raised slopes (rounded to float32)
    give over 500 other entries from 16 heads on."""
    from transformers.models.bloom.modeling_bloom import _get_alibi_slopes

    fp32 = alibi_slopes_fp32(n_heads)
    assert fp32.tolist() == pytest.approx(alibi_slopes(n_heads), rel=1e-6)
    j = torch.arange(2048)
    bias = (fp32[:, None] * j).bfloat16()  # (H, Tk)
    assert torch.equal(bias, (_get_alibi_slopes(n_heads, "cpu")[:, None] * j).bfloat16())
    rounded64 = (torch.tensor(alibi_slopes(n_heads))[:, None] * j).bfloat16()
    differ = (rounded64 != bias).sum().item()
    assert differ == 0 if n_heads == 6 else differ > 500  # 6 heads: powers of two, exact


# --- rotary -----------------------------------------------------------------------------


def complex_rotary(x: torch.Tensor, positions: torch.Tensor, base: float) -> torch.Tensor:
    """RoFormer eq. (13) with complex numbers: pairs (x0 + i x1) times e^{i pos theta_j}."""
    hd = x.shape[-1]
    theta = torch.tensor([base ** (-2 * j / hd) for j in range(hd // 2)], dtype=torch.float64)
    z = torch.view_as_complex(x.double().reshape(*x.shape[:-1], hd // 2, 2).contiguous())
    rot = torch.polar(torch.ones_like(theta), positions.double()[:, None] * theta)  # (T, hd/2)
    return torch.view_as_real(z * rot).flatten(-2)


def rotary_cos_sin(positions: torch.Tensor, rot_dim: int, base: float):
    angles = rotary_angles(positions[None], rot_dim, base)[:, None]  # (1, 1, T, r/2)
    return angles.cos(), angles.sin()


@pytest.mark.parametrize("base", [10000.0, 500.0])
def test_rotary_interleaved_equals_complex_multiplication(base):
    torch.manual_seed(0)
    x = torch.randn(2, 3, 7, 16)  # (B, H, T, hd)
    positions = torch.tensor([0, 1, 2, 5, 11, 40, 63])
    cos, sin = rotary_cos_sin(positions, 16, base)
    got = apply_rotary(x, cos, sin, interleaved=True)
    expected = complex_rotary(x, positions, base)
    torch.testing.assert_close(got.double(), expected, atol=2e-5, rtol=1e-5)


def test_rotary_half_equals_hf_llama():
    torch.manual_seed(0)
    hd, T = 16, 9
    q, k = torch.randn(2, 4, T, hd), torch.randn(2, 2, T, hd)
    positions = torch.tensor([[0, 1, 2, 3, 4, 5, 6, 7, 8], [3, 4, 9, 17, 20, 30, 41, 50, 63]])
    config = LlamaConfig(hidden_size=4 * hd, num_attention_heads=4, max_position_embeddings=64)
    theta = config.rope_parameters["rope_theta"] if hasattr(config, "rope_parameters") else None
    theta = theta or config.rope_theta  # transformers 4.x keeps it on the config itself
    cos_hf, sin_hf = LlamaRotaryEmbedding(config)(q, positions)  # (B, T, hd)
    q_ref, k_ref = apply_rotary_pos_emb(q, k, cos_hf, sin_hf)
    spec = {**TINY, "d_model": 4 * hd, "head": "none"}
    spec["position"] = {"kind": "rotary", "base": theta}  # halves (NeoX/Llama) by default
    position = archzoo.build_model("gpt2", spec).decoder.position
    q_got, k_got = position.rotate(position.prepare(positions, positions), q, k)
    torch.testing.assert_close(q_got, q_ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(k_got, k_ref, atol=1e-5, rtol=1e-5)


def rotate_half_reference(x: torch.Tensor, positions: torch.Tensor, base: float) -> torch.Tensor:
    """GPT-NeoX rotate-half form in float64: x * cos + rotate_half(x) * sin."""
    d = x.shape[-1]
    inv = torch.tensor([base ** (-2 * j / d) for j in range(d // 2)], dtype=torch.float64)
    angles = positions.double()[:, None] * inv
    emb = torch.cat((angles, angles), dim=-1)  # (T, d)
    x = x.double()
    rotated = torch.cat((-x[..., d // 2 :], x[..., : d // 2]), dim=-1)
    return x * emb.cos() + rotated * emb.sin()


@pytest.mark.parametrize("interleaved", [False, True])
def test_partial_rotary_leaves_the_rest_untouched(interleaved):
    torch.manual_seed(0)
    hd, T = 16, 6
    spec = {**TINY, "head": "none", "n_heads": 2}
    spec["position"] = {"kind": "rotary", "fraction": 0.5, "interleaved": interleaved}
    model = archzoo.build_model("gpt2", spec)
    position = model.decoder.position
    assert position.rot_dim == 8
    positions = torch.tensor([0, 3, 4, 9, 20, 33])
    state = position.prepare(positions[None], positions[None])
    q, k = torch.randn(1, 2, T, hd), torch.randn(1, 2, T, hd)
    q_rot, k_rot = position.rotate(state, q, k)
    assert torch.equal(q_rot[..., 8:], q[..., 8:])
    assert torch.equal(k_rot[..., 8:], k[..., 8:])
    ref = complex_rotary if interleaved else rotate_half_reference
    torch.testing.assert_close(
        q_rot[..., :8].double(), ref(q[..., :8], positions, 10000.0), atol=2e-5, rtol=1e-5
    )
    torch.testing.assert_close(
        k_rot[..., :8].double(), ref(k[..., :8], positions, 10000.0), atol=2e-5, rtol=1e-5
    )
    assert not torch.allclose(q_rot[..., 1:8], q[..., 1:8])  # the rotated part did move


@pytest.mark.parametrize("interleaved", [False, True])
def test_rotary_dot_product_depends_only_on_distance(interleaved):
    torch.manual_seed(0)
    hd = 16
    q, k = torch.randn(hd), torch.randn(hd)

    def score(m: int, n: int) -> float:
        positions = torch.tensor([m, n])
        cos, sin = rotary_cos_sin(positions, hd, 10000.0)
        x = torch.stack((q, k))[None, None]  # (1, 1, 2, hd): q at position m, k at n
        rq, rk = apply_rotary(x, cos, sin, interleaved)[0, 0]
        return float(rq @ rk)

    for m, n in [(0, 3), (5, 2), (7, 7), (1, 40)]:
        reference = score(m, n)
        for shift in (1, 9, 20):
            assert score(m + shift, n + shift) == pytest.approx(reference, abs=1e-4)
    assert score(0, 3) != pytest.approx(score(0, 4), abs=1e-3)  # and it does depend on it


# --- ALiBi in a model -------------------------------------------------------------------


def alibi_reference(x, attention, slopes, causal):
    """softmax(QK^T / sqrt(hd) - slope_h |i - j|, causal) V, then the output projection."""
    B, T, D = x.shape
    H = len(slopes)
    hd = D // H
    q, k, v = attention.qkv(x).double().split(D, dim=-1)
    q, k, v = (t.view(B, T, H, hd).transpose(1, 2) for t in (q, k, v))  # (B, H, T, hd)
    i = torch.arange(T)
    distance = (i[:, None] - i[None, :]).abs().double()  # (T, T)
    bias = -torch.tensor(slopes, dtype=torch.float64)[:, None, None] * distance  # (H, T, T)
    scores = q @ k.transpose(-1, -2) / math.sqrt(hd) + bias
    if causal:
        scores = scores.masked_fill(i[None, :] > i[:, None], -math.inf)
    out = (scores.softmax(-1) @ v).transpose(1, 2).reshape(B, T, D)
    return attention.out(out.float())


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("n_heads", [4, 6])
def test_alibi_attention_equals_dense_reference(causal, n_heads):
    torch.manual_seed(0)
    family = {"family": "decoder"} if causal else {"family": "encoder", "block": "post_ln"}
    spec = {**TINY, **family, "n_heads": n_heads, "d_model": 48, "head": "none"}
    model = archzoo.build_model("gpt2", {**spec, "position": "alibi"}).eval()
    stack = model.decoder if causal else model.encoder
    attention = stack.blocks[0].attention
    inputs: list = []
    handle = attention.register_forward_hook(lambda mod, args, out: inputs.append((args[0], out)))
    ids = torch.randint(0, 100, (2, 12))
    with torch.no_grad():
        model(ids)
        handle.remove()
        x, got = inputs[0]
        expected = alibi_reference(x, attention, alibi_slopes(n_heads), causal)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("form", ["key", "key_bf16"])
def test_alibi_by_key_position_is_refused_where_attention_runs_both_ways(form):
    """slope * key position gives the softmax of slope * distance only under a causal mask."""
    spec = {**TINY, "family": "encoder", "head": "mlm", "position": {"kind": "alibi", "form": form}}
    with pytest.raises(ValueError, match=f"form '{form}' adds slope \\* key position"):
        archzoo.build_model(spec, device="meta")
    decoder = {**spec, "family": "decoder", "head": "lm"}
    assert archzoo.build_model(decoder, device="meta").decoder.position.cfg.form == form
