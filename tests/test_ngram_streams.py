"""The n-stream self-attention (`ngram_streams`, ProphetNet) against a loop over streams,
tokens and keys written from its definition; decoding with a cache against the full forward;
the relative buckets against their formula; the spec checks of predicting streams.
(ProphetNet against transformers is tests/test_prophetnet.py.)"""

from __future__ import annotations

import math

import pytest
import torch

import archzoo
from archzoo import SpecError
from archzoo.parts.cache import LayerCache
from archzoo.parts.interfaces import AttentionContext
from archzoo.parts.masks import AttentionMask
from archzoo.plugins.attention.ngram_streams import relative_buckets

BUCKETS, FAR = 6, 9
SPEC = dict(
    name="tiny-streams",
    family="decoder",
    vocab_size=50,
    d_model=16,
    n_layers=1,
    n_heads=2,
    d_ff=24,
    max_len=32,
    dropout=0.0,
    embedding={"kind": "token", "norm": True, "predict_streams": 2},
    position={"kind": "learned", "offset": 1},
    attention={
        "kind": "ngram_streams",
        "fused_qkv": False,
        "buckets": BUCKETS,
        "max_distance": FAR,
    },
    block="post_ln",
    head={"kind": "lm", "shift": False},
)


def attention_of(**options):
    torch.manual_seed(0)
    model = archzoo.build_model({**SPEC, "attention": {**SPEC["attention"], **options}})
    return model.eval().decoder.blocks[0].attention


def bucket(d: int) -> int:
    """T5's unidirectional bucket of distance d (query - key), written out."""
    d = max(d, 0)
    exact = BUCKETS // 2
    if d < exact:
        return d
    return min(
        BUCKETS - 1, int(exact + math.log(d / exact) / math.log(FAR / exact) * (BUCKETS - exact))
    )


def reference(att, x: torch.Tensor, n: int, real: torch.Tensor) -> torch.Tensor:
    """The layer's output by loops: stream 0 are the tokens, streams 1..n predict; `real`
    (B, T) marks the tokens that are not padding."""
    B, L, D = x.shape
    T, H, hd = L // (1 + n), att.n_heads, att.head_dim
    q = (x @ att.q.weight.T + att.q.bias).view(B, L, H, hd)
    k = (x @ att.k.weight.T + att.k.bias).view(B, L, H, hd)
    v = (x @ att.v.weight.T + att.v.bias).view(B, L, H, hd)
    rel = (x @ att.relative.weight.T + att.relative.bias).view(B, L, BUCKETS, H)
    out = torch.zeros(B, L, H, hd)
    for b in range(B):
        for h in range(H):
            for stream in range(1 + n):
                for t in range(T):
                    row = stream * T + t
                    scores, vals = [], []
                    for j in range(T):  # the tokens' keys
                        if not real[b, j]:
                            continue
                        if stream == 0 and j > t:
                            continue
                        if stream > 0 and not (j <= t - (stream - 1) or j == 0):
                            continue
                        ahead = 0 if stream == 0 else 1  # predicting queries stand at t + 1
                        s = q[b, row, h] @ k[b, j, h] / math.sqrt(hd)
                        scores.append(s + rel[b, row, bucket(t + ahead - j), h])
                        vals.append(v[b, j, h])
                    if stream > 0:  # its own key
                        scores.append(
                            q[b, row, h] @ k[b, row, h] / math.sqrt(hd) + rel[b, row, 0, h]
                        )
                        vals.append(v[b, row, h])
                    p = torch.softmax(torch.stack(scores), 0)
                    out[b, row, h] = (p[:, None] * torch.stack(vals)).sum(0)
    return out.reshape(B, L, H * hd) @ att.out.weight.T + att.out.bias


def test_every_stream_equals_a_loop_over_streams_tokens_and_keys():
    att = attention_of()
    B, T, n = 2, 7, 2
    x = torch.randn(B, (1 + n) * T, 16, generator=torch.Generator().manual_seed(1))
    real = torch.ones(B, T, dtype=torch.bool)
    real[1, -2:] = False
    mask = AttentionMask.build(T, T, causal=True, key_padding=real)
    with torch.no_grad():
        got, probs = att.attend(x, AttentionContext(mask, want_probs=True))
        want = reference(att, x, n, real)
    assert got.shape == want.shape == (B, 3 * T, 16)
    assert (got - want).abs().max() <= 1e-5
    assert probs.shape == (B, 2, T, T) and torch.allclose(probs.sum(-1), torch.ones(B, 2, T))


def test_decoding_with_a_cache_equals_the_full_forward():
    """Two tokens at a time after a prompt of three: every stream's rows as the full run's."""
    att = attention_of()
    B, T, n = 2, 7, 2
    x = torch.randn(B, 1 + n, T, 16, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        full, _ = att.attend(
            x.flatten(1, 2), AttentionContext(AttentionMask.build(T, T, causal=True))
        )
        cache = LayerCache(B, 2, 8, T, window=None, dtype=x.dtype, device=x.device)
        for start, stop in ((0, 3), (3, 5), (5, 7)):
            mask = AttentionMask.build(stop - start, stop, causal=True)
            part, _ = att.attend(
                x[:, :, start:stop].flatten(1, 2), AttentionContext(mask, cache=cache)
            )
            want = full.view(B, 1 + n, T, 16)[:, :, start:stop]
            assert (part.view(B, 1 + n, stop - start, 16) - want).abs().max() <= 1e-5


def test_transformers_bias_rows_differ_from_the_own_rows_only_for_several_tokens():
    """stream_major reads the projected rows laid out (token, stream, head) in (stream,
    head, token) order, as transformers does: other numbers for several tokens, the same
    for one."""
    own, hf_rows = attention_of(), attention_of(predict_bias_rows="stream_major")
    hf_rows.load_state_dict(own.state_dict())
    for T, same in ((5, False), (1, True)):
        x = torch.randn(1, 3 * T, 16, generator=torch.Generator().manual_seed(3))
        ctx = AttentionContext(AttentionMask.build(T, T, causal=True))
        with torch.no_grad():
            a, b = own.attend(x, ctx)[0], hf_rows.attend(x, ctx)[0]
        assert torch.equal(a[:, :T], b[:, :T])  # the tokens' stream reads its own rows
        assert torch.allclose(a, b, atol=1e-6) == same


def test_buckets_follow_the_formula():
    d = torch.arange(-3, 40)
    got = relative_buckets(d, BUCKETS, FAR).tolist()
    assert got == [bucket(int(i)) for i in d]
    assert got[:3] == [0, 0, 0] and max(got) == BUCKETS - 1


def test_the_model_runs_its_streams_and_scores_stream_zero():
    torch.manual_seed(0)
    model = archzoo.build_model(SPEC).eval()
    ids = torch.randint(0, 50, (2, 6))
    with torch.no_grad():
        out = model(ids)
        full = model.decoder(ids)  # (B, 3 T, D): the tokens, then two streams
    assert full.shape == (2, 18, 16)
    assert torch.equal(out.last_hidden_state, full[:, :6])
    assert torch.allclose(out.logits, model.head(full[:, 6:12]), atol=1e-6)
    assert out.logits_ngram.shape == (2, 1, 6, 50)


def test_predicting_streams_need_an_n_stream_attention_and_a_decoder():
    with pytest.raises(SpecError, match="attention 'mha' cannot read the 2 predicting streams"):
        archzoo.load_spec({**SPEC, "attention": {"kind": "mha"}})
    with pytest.raises(SpecError, match="predicting streams run beside a causal decoder"):
        archzoo.load_spec(
            {**SPEC, "family": "encoder", "attention": "mha", "head": {"kind": "none"}}
        )
    with pytest.raises(SpecError, match="n-stream attention has one key/value head per query"):
        archzoo.load_spec({**SPEC, "attention": {"kind": "ngram_streams", "n_kv_heads": 1}})
