"""Sparse attention: every pattern and path equals the dense masked reference (<= 1e-5)."""

from __future__ import annotations

import itertools
import warnings

import pytest
import torch
from click.testing import CliRunner
from conftest import tiny

import archzoo
from archzoo import SpecError
from archzoo.parts.masks import AttentionMask
from archzoo.plugins.attention.bigbird import bigbird_layout
from archzoo.plugins.attention.block_sparse import BlockLayoutPattern, generated_layout
from archzoo.plugins.attention.fixed import FixedPattern
from archzoo.plugins.attention.global_local import GlobalLocalPattern
from archzoo.plugins.attention.kernels.band import band_applies
from archzoo.plugins.attention.local import LocalPattern
from archzoo.plugins.attention.longformer import LongformerPattern, global_attention
from archzoo.plugins.attention.sparse import (
    GlobalQKV,
    blocked_attention,
    dense_attention,
    pattern_keep,
    pattern_mask,
    sparse_attention,
)
from archzoo.plugins.attention.sparse import (
    flex_pattern_attention as flex_attention,
)
from archzoo.plugins.attention.strided import StridedPattern

BLOCK = 8


def patterns(T: int) -> dict:
    """Every pattern with block 8 (4 for the block layouts), sized for short sequences."""
    g = torch.zeros(T, dtype=torch.bool)
    g[[0, 5]] = True
    per_batch = torch.zeros(2, T, dtype=torch.bool)
    per_batch[0, 3] = True
    per_batch[1, [1, T - 1]] = True
    return {
        "local": LocalPattern(5, BLOCK),
        "local_wide": LocalPattern(13, BLOCK),
        "strided": StridedPattern(4, BLOCK),
        "strided_odd": StridedPattern(5, BLOCK),
        "fixed": FixedPattern(8, 2, BLOCK),
        "fixed_odd": FixedPattern(6, 3, 4),
        "block_sparse": BlockLayoutPattern(
            lambda n: generated_layout(n, local_blocks=1, global_blocks=1, stride_blocks=3), 4
        ),
        "bigbird": BlockLayoutPattern(
            lambda n: bigbird_layout(n, window_blocks=3, global_blocks=1, random_blocks=2, seed=3),
            4,
        ),
        "longformer": LongformerPattern(3, g, BLOCK),
        "global_local": GlobalLocalPattern(3, 6, False, 4),  # PEGASUS-X: 3 globals, blocks of 6
        "global_local_staggered": GlobalLocalPattern(5, 6, True, BLOCK),
        "longformer_per_batch": LongformerPattern(3, per_batch, BLOCK),
    }


def inputs(T: int, padded: bool, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    B, H, Hkv, hd = 2, 4, 2, 8  # GQA: two query heads per key/value head
    q = torch.randn(B, H, T, hd, generator=g)
    k = torch.randn(B, Hkv, T, hd, generator=g)
    v = torch.randn(B, Hkv, T, hd, generator=g)
    pad = None
    if padded:
        pad = torch.ones(B, T, dtype=torch.bool)
        pad[0, :3] = False  # left padding
        pad[1, T - 10 :] = False  # right padding
    return q, k, v, pad


CASES = list(itertools.product([32, 37], [False, True], [False, True]))  # T, causal, padded


@pytest.mark.parametrize("name", sorted(patterns(32)))
def test_blocked_and_flex_equal_dense_reference(name):
    for T, causal, padded in CASES:
        pattern = patterns(T)[name]
        q, k, v, pad = inputs(T, padded)
        ref = dense_attention(q, k, v, pattern, causal=causal, key_padding=pad)
        assert torch.isfinite(ref).all()
        got = blocked_attention(q, k, v, pattern, causal=causal, key_padding=pad)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # flex without compile: the unfused fallback
            flex = flex_attention(q, k, v, pattern, causal=causal, key_padding=pad)
        where = f"{name} T={T} causal={causal} padded={padded}"
        assert (got - ref).abs().max().item() <= 1e-5, where
        assert (flex - ref).abs().max().item() <= 1e-5, where


def test_longformer_band_and_gradient_paths_equal_dense():
    """Without gradients a Longformer pattern runs on the band path (band.py); when q/k/v
    need gradients, on the block-gathered path: both equal the dense reference, and so do
    the gradients."""
    for (T, causal, padded), name in itertools.product(
        CASES, ["longformer", "longformer_per_batch"]
    ):
        pattern = patterns(T)[name]
        q, k, v, pad = inputs(T, padded)
        mask = pattern_mask(pattern, q, k, causal=causal, key_padding=pad)
        assert band_applies(q, k, v, mask, {"scale": None})
        band = blocked_attention(q, k, v, pattern, causal=causal, key_padding=pad)
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        assert not band_applies(*leaves, mask, {"scale": None})
        w = torch.randn(q.shape, generator=torch.Generator().manual_seed(2))
        ref = dense_attention(*leaves, pattern, causal=causal, key_padding=pad)
        want = torch.autograd.grad((ref * w).sum(), leaves)
        got = blocked_attention(*leaves, pattern, causal=causal, key_padding=pad)
        grads = torch.autograd.grad((got * w).sum(), leaves)
        where = f"{name} T={T} causal={causal} padded={padded}"
        assert (band - ref).abs().max().item() <= 1e-5, where
        assert (got - ref).abs().max().item() <= 1e-5, where
        assert max((a - b).abs().max().item() for a, b in zip(grads, want, strict=True)) <= 1e-5, (
            where
        )


@pytest.mark.parametrize("name", sorted(patterns(32)))
def test_layout_covers_every_allowed_pair(name):
    T = 37
    pattern = patterns(T)[name]
    bs = pattern.block
    nb = -(-T // bs)
    keep = pattern_keep(pattern, T, T, causal=False, key_padding=None).any(0)  # (T, T)
    rows = pattern.global_queries(T, torch.device("cpu"))
    if rows is not None:
        keep[rows[rows >= 0].unique()] = False  # global rows are computed densely
    padded = torch.zeros(nb * bs, nb * bs, dtype=torch.bool)
    padded[:T, :T] = keep
    needed = padded.view(nb, bs, nb, bs).any(3).any(1)
    layout = pattern.layout(nb, T)
    layout = layout.any(0) if layout.dim() == 3 else layout
    assert not (needed & ~layout).any()


def test_window_semantics_match_mistral_and_gpt_neo():
    """Causal window w: query i sees keys max(0, i - w + 1) .. i, i.e. min(i + 1, w) keys."""
    T, w = 20, 5
    keep = pattern_keep(LocalPattern(w, 8), T, T, causal=True, key_padding=None)[0]
    assert keep.sum(-1).tolist() == [min(i + 1, w) for i in range(T)]
    assert keep[10, 6] and not keep[10, 5] and not keep[10, 11]
    both = pattern_keep(LocalPattern(w, 8), T, T, causal=False, key_padding=None)[0]
    assert both[10].nonzero().flatten().tolist() == list(range(6, 15))


def test_child_et_al_patterns():
    strided = pattern_keep(StridedPattern(4, 8), 16, 16, causal=True, key_padding=None)[0]
    assert strided[13].nonzero().flatten().tolist() == [1, 5, 9, 10, 11, 12, 13]
    fixed = pattern_keep(FixedPattern(4, 1, 8), 16, 16, causal=True, key_padding=None)[0]
    assert fixed[13].nonzero().flatten().tolist() == [3, 7, 11, 12, 13]


def test_fully_masked_rows_are_zero_not_nan():
    T = 24
    q, k, v, _ = inputs(T, False)
    pad = torch.ones(2, T, dtype=torch.bool)
    pad[0] = False  # a row of the batch with no real key at all
    pad[1, :6] = False  # left padding: early causal queries see nothing
    for name, pattern in patterns(T).items():
        for impl in ("dense", "blocked"):
            out = sparse_attention(q, k, v, pattern, causal=True, key_padding=pad, impl=impl)
            assert torch.isfinite(out).all(), name
            assert out[0].abs().max() == 0 and out[1, :, :6].abs().max() == 0, name


def test_decoding_rows_use_the_dense_path_with_offsets():
    """Fewer queries than keys (a KV cache): the last queries of the full computation."""
    T = 29
    q, k, v, pad = inputs(T, True)
    for name, pattern in patterns(T).items():
        full = sparse_attention(q, k, v, pattern, causal=True, key_padding=pad)
        last = sparse_attention(q[:, :, -3:], k, v, pattern, causal=True, key_padding=pad)
        assert (last - full[:, :, -3:]).abs().max() <= 1e-5, name


TINY = tiny(family="decoder", max_len=128, position={"kind": "rotary"}, head="lm")
KINDS = {
    "local": {"window": 7},
    "strided": {"stride": 6, "block": 8},
    "fixed": {"stride": 8, "summary": 2, "block": 8},
    "block_sparse": {"block": 8, "local_blocks": 1, "global_blocks": 1},
    "bigbird": {"block": 8, "random_blocks": 2, "seed": 5},
    "longformer": {"window": 6, "global_tokens": [0, 9], "block": 8},
}


@pytest.mark.parametrize("family", ["decoder", "encoder"])
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_model_with_sparse_attention_equals_dense_path(kind, family):
    """Whole models (rotary, GQA, padding): the blocked path equals the dense reference."""
    spec = {**TINY, "family": family, "head": "lm" if family == "decoder" else "mlm"}
    spec["attention"] = {"kind": kind, "n_kv_heads": 2, **KINDS[kind]}
    torch.manual_seed(0)
    model = archzoo.build_model(spec).eval()
    dense = archzoo.build_model(spec, overrides={"attention.impl": "dense"}).eval()
    dense.load_state_dict(model.state_dict())
    ids = torch.randint(0, 50, (2, 45))
    mask = torch.ones(2, 45, dtype=torch.long)
    mask[1, 30:] = 0
    with torch.no_grad():
        a = model(ids, attention_mask=mask).logits
        b = dense(ids, attention_mask=mask).logits
        wide = archzoo.build_model({**spec, "attention": {"kind": "mha", "n_kv_heads": 2}})
        wide.load_state_dict(model.state_dict())
        c = wide.eval()(ids, attention_mask=mask).logits
    assert (a - b).abs().max().item() <= 1e-5
    assert (a - c)[0].abs().max().item() > 1e-4  # the pattern changes the result


def test_bigbird_random_blocks_are_seeded():
    kw = {"window_blocks": 3, "global_blocks": 1, "random_blocks": 3}
    a = bigbird_layout(16, seed=1, **kw)
    assert torch.equal(a, bigbird_layout(16, seed=1, **kw))
    assert not torch.equal(a, bigbird_layout(16, seed=2, **kw))
    assert a.sum(-1)[1:-1].max() <= 3 + 2 + 3  # window + two global blocks + random draws


def test_longformer_global_tokens_per_batch():
    spec = {**TINY, "family": "encoder", "head": "mlm", "position": "learned"}
    spec["attention"] = {"kind": "longformer", "window": 4, "block": 8}
    model = archzoo.build_model(spec).eval()
    dense = archzoo.build_model(spec, overrides={"attention.impl": "dense"}).eval()
    dense.load_state_dict(model.state_dict())
    ids = torch.randint(0, 50, (2, 40))
    g = torch.zeros(2, 40, dtype=torch.bool)
    g[0, 0] = g[1, 17] = g[1, 33] = True
    with torch.no_grad(), global_attention(model, g), global_attention(dense, g):
        a = model(ids).logits
        b = dense(ids).logits
    plain = model(ids).logits
    assert (a - b).abs().max() <= 1e-5
    assert (a - plain).abs().max() > 1e-4


def test_longformer_global_projections_drive_global_rows():
    """Global rows use q/k/v_global over all keys; other rows the usual projections."""
    spec = {**TINY, "family": "encoder", "head": "none", "position": "none", "n_layers": 1}
    spec["attention"] = {
        "kind": "longformer",
        "window": 4,
        "global_tokens": [0],
        "global_projections": True,
    }
    model = archzoo.build_model(spec).eval()
    att = model.encoder.blocks[0].attention
    x = torch.randn(1, 20, 32)
    from archzoo.parts.interfaces import AttentionContext
    from archzoo.parts.masks import AttentionMask

    ctx = AttentionContext(AttentionMask.build(20, 20, causal=False))
    with torch.no_grad():
        out = att(x, ctx)
        heads = att._heads
        qg, kg, vg = heads(att.q_global(x), 4), heads(att.k_global(x), 4), heads(att.v_global(x), 4)
        row0 = torch.nn.functional.scaled_dot_product_attention(qg[:, :, :1], kg, vg)
        row0 = att.out(row0.transpose(1, 2).reshape(1, 1, 32))
    assert (out[:, :1] - row0).abs().max() <= 1e-5


@pytest.mark.parametrize("causal", [False, True])
def test_longformer_global_rows_in_model_space_equal_projected_keys(causal):
    """With few global rows their attention never projects every token's global key and
    value (scores (q Wk) . x, output Wv (sum p x) + bv): it equals attention over q/k/v_global
    of every token, with GQA, biases, a padded row and a slot with no row (-1)."""
    spec = {**TINY, "family": "encoder", "head": "none", "position": "none", "n_layers": 1}
    spec["attention"] = {
        "kind": "longformer",
        "window": 4,
        "global_projections": True,
        "n_kv_heads": 2,
    }
    torch.manual_seed(0)
    att = archzoo.build_model(spec).encoder.blocks[0].attention
    with torch.no_grad():
        for p in att.parameters():
            p.add_(0.1 * torch.randn_like(p))  # biases not zero
    x = torch.randn(2, 20, 32)
    rows = torch.tensor([[0, 7], [12, -1]])  # (B, G) global query rows
    pad = torch.ones(2, 20, dtype=torch.bool)
    pad[1, 15:] = False
    mask = AttentionMask(20, 20, causal=causal, key_padding=pad)
    glob = att.global_qkv(x)
    assert att.n_heads * rows.shape[1] < att.kv_dim  # the model-space path applies
    with torch.no_grad():
        want = GlobalQKV.rows_attention(glob, rows, mask, scale=None)  # (B, H, G, hd)
        got = glob.rows_attention(rows, mask, scale=None)
    assert got.shape == (2, 4, 2, 8)
    assert (got - want).abs().max().item() <= 1e-5
    assert got[1, :, 1].abs().max() == 0  # no row: zeros


def test_per_layer_mixing_in_the_spec():
    """GPT-Neo's alternating global/local and GPT-3's alternating dense/sparse layers."""
    spec = {**TINY, "n_layers": 4, "attention": {"kind": "mha"}}
    spec["layers"] = [{"select": "1::2", "attention": {"kind": "local", "window": 3}}]
    model = archzoo.build_model(spec)
    kinds = [model.decoder.blocks[i].attention.name for i in model.decoder.layer_map]
    assert kinds == ["mha", "local", "mha", "local"]
    spec["layers"] = [{"select": [0, 2], "attention": {"kind": "strided", "stride": 4}}]
    model = archzoo.build_model(spec)
    kinds = [model.decoder.blocks[i].attention.name for i in model.decoder.layer_map]
    assert kinds == ["strided", "mha", "strided", "mha"]


def test_score_bias_positions_are_refused():
    spec = {**TINY, "position": "alibi", "attention": {"kind": "local", "window": 4}}
    with pytest.raises(SpecError, match="cannot add the score bias of position 'alibi'"):
        archzoo.load_spec(spec)


@pytest.mark.parametrize("name", ["bigbird-base", "longformer-base", "sparse-transformer"])
def test_sparse_zoo_specs_build_on_meta(name):
    model = archzoo.build_model(name, device="meta")
    assert model.spec.data["attention"]["kind"] in KINDS


def test_mask_cli_prints_the_pattern(tmp_path):
    from archzoo.cli.mask import mask

    runner = CliRunner()
    result = runner.invoke(mask, ["gpt-neo-125m", "--len", "12", "--layer", "1"])
    assert result.exit_code == 0, result.output
    grid = [line for line in result.output.splitlines() if line.startswith("q")]
    assert len(grid) == 12
    cells = [line.split("|")[1] for line in grid]
    assert cells[0] == "#" + "." * 11 and cells[11] == "#" * 12  # window 256 > 12: causal
    spec = tmp_path / "neo.yaml"
    spec.write_text(
        "extends: gpt-neo-125m\nname: neo-w3\nlayers:\n"
        "  - {select: '1::2', attention: {kind: local, window: 3}}\n"
    )
    result = runner.invoke(mask, [str(spec), "--len", "8", "--layer", "1"])
    assert result.exit_code == 0, result.output
    cells = [line.split("|")[1] for line in result.output.splitlines() if line.startswith("q")]
    assert cells[5] == "...###.."
    out = tmp_path / "m.png"
    result = runner.invoke(mask, ["bigbird-base", "--len", "512", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"  # its axes: tests/test_mask_view.py
