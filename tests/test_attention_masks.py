"""Masks: causality, padding, empty rows and the mha layer against a dense reference."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from conftest import tiny

import archzoo
from archzoo.parts.masks import AttentionMask

V = 100
TINY = tiny(vocab_size=V)
DECODER_POSITIONS = ["learned", "sinusoidal", "rotary", "alibi", "relative", "t5_relative"]


def decoder(position: str = "learned", **overrides) -> archzoo.ZooModel:
    torch.manual_seed(0)
    return archzoo.build_model("gpt2", {**TINY, "position": position, **overrides}).eval()


def encoder(**overrides) -> archzoo.ZooModel:
    torch.manual_seed(0)
    return archzoo.build_model("bert-base", {**TINY, **overrides}).eval()


def encoder_decoder(**overrides) -> archzoo.ZooModel:
    torch.manual_seed(0)
    spec = {"name": "tiny-ed", "family": "encoder-decoder", **TINY, "head": "lm", **overrides}
    return archzoo.build_model(spec).eval()


def random_ids(batch: int, length: int, seed: int = 1) -> torch.Tensor:
    return torch.randint(1, V, (batch, length), generator=torch.Generator().manual_seed(seed))


class Recorder:
    """Records (x, memory, output) of every call of some attention modules."""

    def __init__(self, modules: list[torch.nn.Module]) -> None:
        self.calls: list[tuple[torch.nn.Module, torch.Tensor, torch.Tensor | None, torch.Tensor]]
        self.calls = []
        self.handles = [m.register_forward_hook(self.hook, with_kwargs=True) for m in modules]

    def hook(self, module, args, kwargs, out) -> None:
        memory = args[2] if len(args) > 2 else kwargs.get("memory")
        self.calls.append((module, args[0], memory, out))

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc) -> None:
        for h in self.handles:
            h.remove()


# --- causality --------------------------------------------------------------------------


@pytest.mark.parametrize("position", DECODER_POSITIONS)
def test_decoder_outputs_ignore_future_tokens(position):
    model = decoder(position)
    ids = random_ids(2, 12)
    with torch.no_grad():
        base = model(ids).logits
        for t in (0, 4, 10):
            changed = ids.clone()
            changed[:, t + 1 :] = random_ids(2, 11 - t, seed=t + 7)
            assert not torch.equal(changed[:, t + 1 :], ids[:, t + 1 :])
            got = model(changed).logits
            torch.testing.assert_close(got[:, : t + 1], base[:, : t + 1], atol=1e-6, rtol=0)
            assert (got[:, t + 1 :] - base[:, t + 1 :]).abs().max() > 1e-3  # the change shows


def test_encoder_first_position_sees_the_last_token():
    model = encoder()
    ids = random_ids(1, 10)
    changed = ids.clone()
    changed[0, -1] = (ids[0, -1] + 1) % V
    with torch.no_grad():
        a = model(ids).last_hidden_state[0, 0]
        b = model(changed).last_hidden_state[0, 0]
    assert (a - b).abs().max() > 1e-4


@pytest.mark.parametrize("position", ["rotary", "alibi"])
def test_prefix_logits_do_not_change_when_the_sequence_grows(position):
    model = decoder(position)
    ids = random_ids(2, 16)
    with torch.no_grad():
        full = model(ids).logits
        for t in (1, 5, 11):
            prefix = model(ids[:, :t]).logits
            torch.testing.assert_close(prefix, full[:, :t], atol=1e-5, rtol=1e-5)


# --- padding ----------------------------------------------------------------------------


def check_right_padding(model, ids, mask, **extra):
    with torch.no_grad():
        batched = model(ids, attention_mask=mask, **extra).logits
        assert torch.isfinite(batched).all()
        for row in range(ids.shape[0]):
            n = int(mask[row].sum())
            alone = model(
                ids[row : row + 1, :n], **{k: v[row : row + 1, :n] for k, v in extra.items()}
            )
            torch.testing.assert_close(batched[row, :n], alone.logits[0], atol=1e-5, rtol=1e-5)


def right_padded_mask(batch: int, length: int, lengths: list[int]) -> torch.Tensor:
    mask = torch.zeros(batch, length, dtype=torch.long)
    for row, n in enumerate(lengths):
        mask[row, :n] = 1
    return mask


def test_right_padding_encoder_matches_rows_alone():
    model = encoder()
    ids = random_ids(3, 10)
    mask = right_padded_mask(3, 10, [10, 6, 1])
    token_types = (torch.arange(10) >= 4).long().expand(3, 10)
    check_right_padding(model, ids, mask, token_type_ids=token_types)


@pytest.mark.parametrize("position", DECODER_POSITIONS)
def test_right_padding_decoder_matches_rows_alone(position):
    model = decoder(position)
    ids = random_ids(3, 10)
    check_right_padding(model, ids, right_padded_mask(3, 10, [10, 7, 2]))


@pytest.mark.parametrize("position", ["learned", "rotary", "t5_relative"])
def test_right_padding_encoder_decoder_matches_rows_alone(position):
    model = encoder_decoder(position=position)
    src, tgt = random_ids(3, 9), random_ids(3, 7, seed=2)
    src_mask = right_padded_mask(3, 9, [9, 5, 2])
    tgt_mask = right_padded_mask(3, 7, [4, 7, 1])
    with torch.no_grad():
        out = model(
            src, attention_mask=src_mask, decoder_input_ids=tgt, decoder_attention_mask=tgt_mask
        )
        assert torch.isfinite(out.logits).all()
        assert torch.isfinite(out.encoder_last_hidden_state).all()
        for row in range(3):
            ns, nt = int(src_mask[row].sum()), int(tgt_mask[row].sum())
            alone = model(src[row : row + 1, :ns], decoder_input_ids=tgt[row : row + 1, :nt])
            torch.testing.assert_close(out.logits[row, :nt], alone.logits[0], atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(
                out.encoder_last_hidden_state[row, :ns],
                alone.encoder_last_hidden_state[0],
                atol=1e-5,
                rtol=1e-5,
            )


@pytest.mark.parametrize("position", ["learned", "alibi"])
def test_left_padding_with_shifted_positions_matches_row_alone(position):
    model = decoder(position)
    ids = random_ids(2, 9)
    mask = torch.ones(2, 9, dtype=torch.long)
    mask[1, :3] = 0
    positions = (mask.cumsum(-1) - 1).clamp_min(0)
    with torch.no_grad():
        batched = model(ids, attention_mask=mask, position_ids=positions).logits
        alone = model(ids[1:, 3:]).logits
    torch.testing.assert_close(batched[1, 3:], alone[0], atol=1e-5, rtol=1e-5)


# --- rows with no key -------------------------------------------------------------------

DTYPES = [torch.float32, torch.bfloat16, torch.float16]


def skip_unless_supported(dtype: torch.dtype) -> None:
    if dtype != torch.float16:
        return
    try:
        q = torch.randn(1, 1, 2, 4, dtype=dtype)
        F.scaled_dot_product_attention(q, q, q, attn_mask=torch.ones(1, 1, 2, 2, dtype=torch.bool))
        F.layer_norm(q, (4,))
    except RuntimeError as err:  # pragma: no cover - depends on the torch build
        pytest.skip(f"fp16 attention is not supported on CPU by this torch build: {err}")


def attention_modules(stack) -> list[torch.nn.Module]:
    return [block.attention for block in stack.blocks]


def assert_empty_rows_are_zero(calls, rows: torch.Tensor) -> None:
    """Where `rows` (B, T) is True, the attention core gave zeros: the layer returns out.bias."""
    for module, _, _, out in calls:
        assert torch.isfinite(out).all()
        expected = module.out.bias.expand_as(out[rows])
        assert torch.equal(out[rows], expected)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("position", ["learned", "rotary", "alibi"])
def test_left_padded_causal_row_gives_zeros_not_nan(dtype, position):
    skip_unless_supported(dtype)
    model = decoder(position).to(dtype)
    ids = random_ids(2, 8)
    mask = torch.ones(2, 8, dtype=torch.long)
    mask[1, :3] = 0  # queries 0..2 of row 1 see only padded keys
    with Recorder(attention_modules(model.decoder)) as rec, torch.no_grad():
        logits = model(ids, attention_mask=mask).logits
    assert torch.isfinite(logits).all()
    empty = torch.zeros(2, 8, dtype=torch.bool)
    empty[1, :3] = True
    assert_empty_rows_are_zero(rec.calls, empty)
    for _, _, _, out in rec.calls:  # rows that see a key are not zeroed
        assert not torch.equal(out[1, 3], out[1, 0])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_all_masked_encoder_row_gives_zeros_not_nan(dtype):
    skip_unless_supported(dtype)
    model = encoder().to(dtype)
    ids = random_ids(2, 6)
    mask = torch.ones(2, 6, dtype=torch.long)
    mask[1] = 0
    with Recorder(attention_modules(model.encoder)) as rec, torch.no_grad():
        out = model(ids, attention_mask=mask)
    with torch.no_grad():
        alone = model(ids[:1]).logits
    assert torch.isfinite(out.logits).all()
    assert torch.isfinite(out.last_hidden_state).all()
    empty = torch.zeros(2, 6, dtype=torch.bool)
    empty[1] = True
    assert_empty_rows_are_zero(rec.calls, empty)
    tol = 1e-5 if dtype == torch.float32 else 1e-2
    torch.testing.assert_close(out.logits[:1], alone, atol=tol, rtol=tol)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_all_masked_source_row_gives_zero_cross_attention(dtype):
    skip_unless_supported(dtype)
    model = encoder_decoder().to(dtype)
    src, tgt = random_ids(2, 7), random_ids(2, 5, seed=2)
    src_mask = torch.ones(2, 7, dtype=torch.long)
    src_mask[1] = 0  # row 1 has no source token at all
    blocks = model.decoder.blocks
    with Recorder([b.cross_attention for b in blocks]) as rec, torch.no_grad():
        out = model(src, attention_mask=src_mask, decoder_input_ids=tgt)
    assert torch.isfinite(out.logits).all()
    empty = torch.zeros(2, 5, dtype=torch.bool)
    empty[1] = True
    assert_empty_rows_are_zero(rec.calls, empty)


# --- mha against a dense reference ------------------------------------------------------


def projection_weights(att) -> tuple[tuple, tuple, tuple]:
    """(weight, bias) of q, k and v, read from whatever projections the layer has."""

    def wb(linear, rows=slice(None)):
        bias = linear.bias[rows] if linear.bias is not None else None
        return linear.weight[rows], bias

    qd, kvd = att.n_heads * att.head_dim, att.n_kv * att.head_dim
    if hasattr(att, "qkv"):
        lin = att.qkv
        return wb(lin, slice(0, qd)), wb(lin, slice(qd, qd + kvd)), wb(lin, slice(qd + kvd, None))
    if hasattr(att, "kv"):
        return wb(att.q), wb(att.kv, slice(0, kvd)), wb(att.kv, slice(kvd, None))
    return wb(att.q), wb(att.k), wb(att.v)


def dense_reference(att, x, memory, keep) -> torch.Tensor:
    """softmax(Q K^T / sqrt(hd), masked) V per head in float64; keep (B, Tq, Tk) bool."""
    H, Hkv, hd = att.n_heads, att.n_kv, att.head_dim
    src = x if memory is None else memory
    B, Tq, Tk = x.shape[0], x.shape[1], src.shape[1]
    (wq, bq), (wk, bk), (wv, bv) = projection_weights(att)

    def proj(t, w, b):
        y = t.double() @ w.double().t()
        return y if b is None else y + b.double()

    q = proj(x, wq, bq).view(B, Tq, H, hd)
    k = proj(src, wk, bk).view(B, Tk, Hkv, hd)
    v = proj(src, wv, bv).view(B, Tk, Hkv, hd)
    out = torch.zeros(B, Tq, H, hd, dtype=torch.float64)
    group = H // Hkv
    for h in range(H):
        g = h // group  # query head h reads key/value head h // (H / Hkv)
        scores = torch.einsum("bqd,bkd->bqk", q[:, :, h], k[:, :, g]) / math.sqrt(hd)
        scores = scores.masked_fill(~keep, -math.inf)
        probs = torch.nan_to_num(scores.softmax(-1), nan=0.0)  # rows with no key: zeros
        out[:, :, h] = probs @ v[:, :, g]
    out = out.reshape(B, Tq, H * hd) @ att.out.weight.double().t()
    return out if att.out.bias is None else out + att.out.bias.double()


def self_keep(mask: torch.Tensor, causal: bool) -> torch.Tensor:
    B, T = mask.shape
    keep = mask.bool()[:, None, :].expand(B, T, T)
    if causal:
        keep = keep & torch.ones(T, T, dtype=torch.bool).tril()
    return keep


ATTENTION_VARIANTS = [
    pytest.param({}, id="mha-fused"),
    pytest.param({"fused_qkv": False}, id="mha-unfused"),
    pytest.param({"n_kv_heads": 2}, id="gqa-fused"),
    pytest.param({"n_kv_heads": 2, "fused_qkv": False}, id="gqa-unfused"),
    pytest.param({"n_kv_heads": 1}, id="mqa-fused"),
    pytest.param({"n_kv_heads": 1, "fused_qkv": False, "bias": False}, id="mqa-unfused-nobias"),
]


@pytest.mark.parametrize("padded", [False, True], ids=["full", "padded"])
@pytest.mark.parametrize("family", ["encoder", "decoder"])
@pytest.mark.parametrize("attention", ATTENTION_VARIANTS)
def test_mha_equals_dense_reference(attention, family, padded):
    att_spec = {"kind": "mha", **attention}
    if family == "encoder":
        model = encoder(attention=att_spec)
        stack = model.encoder
    else:
        model = decoder(attention=att_spec)
        stack = model.decoder
    ids = random_ids(3, 9)
    mask = right_padded_mask(3, 9, [9, 5, 2] if padded else [9, 9, 9])
    with Recorder(attention_modules(stack)) as rec, torch.no_grad():
        model(ids, attention_mask=mask if padded else None)
    assert len(rec.calls) == TINY["n_layers"]
    keep = self_keep(mask, causal=family == "decoder")
    for att, x, memory, out in rec.calls:
        assert att.n_kv == attention.get("n_kv_heads", 4)
        expected = dense_reference(att, x, memory, keep)
        torch.testing.assert_close(out.double(), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("attention", ATTENTION_VARIANTS)
def test_cross_attention_equals_dense_reference(attention):
    model = encoder_decoder(attention={"kind": "mha", **attention})
    src, tgt = random_ids(3, 9), random_ids(3, 6, seed=2)
    src_mask = right_padded_mask(3, 9, [9, 4, 1])
    tgt_mask = right_padded_mask(3, 6, [6, 6, 3])
    blocks = model.decoder.blocks
    with Recorder([b.cross_attention for b in blocks]) as rec, torch.no_grad():
        out = model(
            src, attention_mask=src_mask, decoder_input_ids=tgt, decoder_attention_mask=tgt_mask
        )
    assert len(rec.calls) == TINY["n_layers"]
    keep = src_mask.bool()[:, None, :].expand(3, 6, 9)  # every target query sees real sources
    for att, x, memory, got in rec.calls:
        torch.testing.assert_close(memory, out.encoder_last_hidden_state, atol=0, rtol=0)
        expected = dense_reference(att, x, memory, keep)
        torch.testing.assert_close(got.double(), expected, atol=1e-5, rtol=1e-5)


def test_a_causal_self_attention_mask_never_builds_its_dense_form(monkeypatch):
    """SDPA gets is_causal alone, and no query can be empty, so neither call materialises the
    (Tq, Tk) keep mask (at 32k tokens it was 1 GiB and 2 s of a dense-attention prefill)."""
    mask = AttentionMask.build(4096, 4096, causal=True)

    def refuse():
        raise AssertionError("the dense keep mask was built")

    monkeypatch.setattr(mask, "allowed", refuse)
    assert mask.empty() is None
    assert mask.sdpa() == {"attn_mask": None, "is_causal": True}
    out = torch.ones(1, 2, 4096, 8)
    assert mask.zero_empty_rows(out) is out
