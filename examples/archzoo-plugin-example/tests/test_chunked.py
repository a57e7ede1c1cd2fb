"""The chunked kernel: the formula on its own, and chosen by name for a model's layers."""

from __future__ import annotations

from collections.abc import Iterator

import archzoo_example
import pytest
import torch
from archzoo_example import chunked, chunked_module

import archzoo
from archzoo.parts.kernels import Scoring
from archzoo.parts.masks import AttentionMask

TINY = {"n_layers": 2, "d_model": 32, "n_heads": 4, "d_ff": 48, "vocab_size": 64, "max_len": 160}


@pytest.fixture()
def installed() -> Iterator[None]:
    """Kernels are looked up in the global registry: make sure it has the plugin."""
    reg = archzoo.get_registry()
    if "chunked" in archzoo.list_attention_impls():
        yield
        return
    assert reg.register_plugin(archzoo_example, "example").status == "ok"
    yield
    reg.unregister_plugin("example")


def test_chunked_is_softmax_attention_block_by_block():
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 4, 150, 8), torch.randn(2, 2, 150, 8), torch.randn(2, 2, 150, 8)
    pad = torch.ones(2, 150, dtype=torch.bool)
    pad[1, :5] = False
    mask = AttentionMask(150, 150, causal=True, key_padding=pad)
    out, probs = chunked(q, k, v, mask, Scoring(scale=0.3))
    kk, vv = k.repeat_interleave(2, 1), v.repeat_interleave(2, 1)
    s = (q @ kk.transpose(-1, -2) * 0.3).masked_fill(~mask.allowed(), -torch.inf)
    expected = s.softmax(-1).nan_to_num(0.0) @ vv  # padded queries see no key: zeros
    assert probs is None
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)


def test_chunked_refuses_what_it_cannot_compute():
    q = torch.randn(1, 2, 4, 8)
    mask = AttentionMask(4, 4, causal=True)
    assert chunked.refuses(q, q, mask, Scoring(softcap=5.0)) == "plain softmax scores only"
    assert chunked.refuses(q, q, mask, Scoring(dropout=0.1)) == "dropout"
    assert chunked.refuses(q, q, mask, Scoring()) is None


def test_a_model_runs_the_chunked_kernel_by_name(installed, monkeypatch):
    assert "chunked" in archzoo.list_attention_impls()
    model = archzoo.build_model("gpt2", TINY, attention_impl="chunked").eval()
    assert model.attention_impl == "chunked"
    rows = []
    monkeypatch.setattr(chunked_module, "ROWS", 50)  # 150 queries: 3 blocks a layer

    def counting(tensors, dim=0):
        rows.append(len(tensors))
        return torch.cat(tensors, dim=dim)

    monkeypatch.setattr(chunked_module, "torch", _Torch(counting))
    ids = torch.randint(0, 64, (2, 150), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        got = model(ids).logits
        expected = model.set_attention_impl("sdpa")(ids).logits
    assert rows == [3, 3]  # both layers ran the plugin's kernel
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


class _Torch:
    """torch, with `cat` counted (to see the kernel run)."""

    def __init__(self, cat):  # noqa: ANN001
        self.cat = cat

    def __getattr__(self, name):  # noqa: ANN001, ANN204
        return getattr(torch, name)
