"""Training memory: the chunked LM head + loss and the MLP that recomputes its activation
match the plain computations (values and gradients)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import archzoo
from archzoo.plugins.head import losses
from archzoo.plugins.head.losses import linear_cross_entropy

VOCAB = 37
TINY_GPT = {
    "n_layers": 2,
    "d_model": 32,
    "n_heads": 4,
    "d_ff": 64,
    "vocab_size": VOCAB,
    "max_len": 64,
    "dropout": 0.0,
}
TINY_SEQ2SEQ = {
    "name": "tiny-seq2seq",
    "family": "encoder-decoder",
    "vocab_size": VOCAB,
    "d_model": 32,
    "n_layers": 2,
    "n_heads": 4,
    "d_ff": 64,
    "max_len": 64,
    "dropout": 0.0,
    "embedding": "token",
    "position": "sinusoidal",
    "attention": {"kind": "mha"},
    "block": "post_ln",
    "norm": "layernorm",
    "ffn": {"kind": "mlp", "activation": "relu"},
    "head": {"kind": "lm", "tie": False, "bias": True, "fixed_bias": True, "rescale": True},
}


@pytest.fixture
def small_chunks(monkeypatch):
    """Chunks of 5 rows, so every batch below spans several chunks and a ragged last one."""
    monkeypatch.setattr(losses, "CHUNK_ELEMENTS", 5 * VOCAB)


def grads(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    out = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    return out


def assert_same_loss_and_grads(model: torch.nn.Module, **inputs: torch.Tensor) -> None:
    plain = model(**inputs)
    plain.loss.backward()
    plain_grads = grads(model)
    chunked = model(**inputs, return_logits=False)
    assert chunked.logits is None
    chunked.loss.backward()
    chunked_grads = grads(model)
    torch.testing.assert_close(chunked.loss, plain.loss, rtol=0, atol=1e-6)
    assert chunked_grads.keys() == plain_grads.keys() and len(plain_grads) > 5
    for name, g in plain_grads.items():
        torch.testing.assert_close(chunked_grads[name], g, rtol=0, atol=1e-6, msg=name)


def test_decoder_chunked_loss_equals_plain_value_and_gradients(small_chunks):
    torch.manual_seed(0)
    model = archzoo.build_model("gpt2", TINY_GPT)
    ids = torch.randint(0, VOCAB, (3, 11))
    labels = ids.clone()
    labels[0, 3:7] = -100
    labels[2, -1] = -100
    assert_same_loss_and_grads(model, input_ids=ids, labels=labels)


def test_seq2seq_chunked_loss_equals_plain_with_bias_fixed_bias_and_rescale(small_chunks):
    torch.manual_seed(0)
    model = archzoo.build_model(TINY_SEQ2SEQ)
    with torch.no_grad():
        model.head.fixed_bias.normal_()
        model.head.proj.bias.normal_()
    src, tgt = torch.randint(0, VOCAB, (2, 9)), torch.randint(0, VOCAB, (2, 8))
    labels = tgt.clone()
    labels[1, :3] = -100
    assert_same_loss_and_grads(model, input_ids=src, decoder_input_ids=tgt, labels=labels)
    assert model.head.proj.bias.requires_grad


def test_logits_still_returned_by_default_and_loss_only_without_them():
    torch.manual_seed(0)
    model = archzoo.build_model("gpt2", TINY_GPT).eval()
    ids = torch.randint(0, VOCAB, (2, 7))
    out = model(ids, labels=ids)
    assert out.logits is not None and out.logits.shape == (2, 7, VOCAB)
    reference = F.cross_entropy(out.logits[:, :-1].reshape(-1, VOCAB), ids[:, 1:].reshape(-1))
    torch.testing.assert_close(out.loss, reference, rtol=0, atol=1e-6)
    lean = model(ids, labels=ids, return_logits=False)
    assert lean.logits is None and lean.last_hidden_state.shape == (2, 7, 32)
    torch.testing.assert_close(lean.loss, out.loss, rtol=0, atol=1e-6)
    with torch.no_grad():
        torch.testing.assert_close(model(ids, labels=ids, return_logits=False).loss, out.loss)
    assert model(ids, return_logits=False).loss is None


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_linear_cross_entropy_matches_torch_with_ignore_index_and_label_smoothing(smoothing):
    torch.manual_seed(0)
    hidden = torch.randn(4, 6, 16, requires_grad=True)
    weight = (0.2 * torch.randn(VOCAB, 16)).requires_grad_()
    bias = torch.randn(VOCAB, requires_grad=True)
    labels = torch.randint(0, VOCAB, (4, 6))
    labels[1] = -100
    labels[3, ::2] = -100
    logits = F.linear(hidden, weight, bias)
    plain = F.cross_entropy(
        logits.reshape(-1, VOCAB), labels.reshape(-1), label_smoothing=smoothing
    )
    expected = torch.autograd.grad(plain, (hidden, weight, bias))
    chunked = linear_cross_entropy(
        hidden, weight, bias, labels, shift=False, label_smoothing=smoothing, chunk_rows=5
    )
    got = torch.autograd.grad(chunked, (hidden, weight, bias))
    torch.testing.assert_close(chunked, plain, rtol=0, atol=1e-6)
    for g, e in zip(got, expected, strict=True):
        torch.testing.assert_close(g, e, rtol=0, atol=1e-6)


def test_linear_cross_entropy_scales_by_the_upstream_gradient_and_refuses_bad_input():
    torch.manual_seed(0)
    hidden = torch.randn(5, 8, requires_grad=True)
    weight = torch.randn(VOCAB, 8)
    labels = torch.randint(0, VOCAB, (5,))
    (3 * linear_cross_entropy(hidden, weight, None, labels, shift=False)).backward()
    plain = torch.autograd.grad(3 * F.cross_entropy(hidden @ weight.T, labels), hidden)[0]
    torch.testing.assert_close(hidden.grad, plain, rtol=0, atol=1e-6)
    with pytest.raises(ValueError, match="labels of shape"):
        linear_cross_entropy(hidden, weight, None, labels[:4], shift=False)
    with pytest.raises(ValueError, match="label_smoothing"):
        linear_cross_entropy(hidden, weight, None, labels, shift=False, label_smoothing=2.0)


def test_bf16_chunked_loss_is_close_to_plain(small_chunks):
    torch.manual_seed(0)
    model = archzoo.build_model("gpt2", TINY_GPT, dtype=torch.bfloat16)
    ids = torch.randint(0, VOCAB, (2, 9))
    plain = model(ids, labels=ids).loss
    chunked = model(ids, labels=ids, return_logits=False).loss
    assert chunked.dtype == plain.dtype == torch.float32
    torch.testing.assert_close(chunked, plain, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("activation", ["relu", "gelu", "gelu_tanh", "silu"])
def test_mlp_recomputing_its_activation_matches_plain_linears(activation):
    torch.manual_seed(0)
    spec = {**TINY_GPT, "ffn": {"kind": "mlp", "activation": activation}}
    ffn = archzoo.build_model("gpt2", spec).decoder.blocks[0].ffn.train()
    x = torch.randn(2, 5, 32, requires_grad=True)
    act = {"relu": F.relu, "gelu": F.gelu, "silu": F.silu}.get(
        activation, lambda t: F.gelu(t, approximate="tanh")
    )

    def plain(x: torch.Tensor) -> torch.Tensor:
        h = F.linear(x, ffn.fc_in.weight, ffn.fc_in.bias)
        return F.linear(act(h), ffn.fc_out.weight, ffn.fc_out.bias)

    expected = plain(x)
    params = (x, *ffn.parameters())
    upstream = torch.randn_like(expected)
    want = torch.autograd.grad(expected, params, upstream)
    got_out = ffn(x)
    got = torch.autograd.grad(got_out, params, upstream)
    torch.testing.assert_close(got_out, expected, rtol=0, atol=1e-6)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=0, atol=1e-6)
    # second order (create_graph) too: the recomputed activation stays differentiable
    (want_x,) = torch.autograd.grad(plain(x).pow(2).sum(), x, create_graph=True)
    (got_x,) = torch.autograd.grad(ffn(x).pow(2).sum(), x, create_graph=True)
    want2 = torch.autograd.grad(want_x.pow(2).sum(), params)
    got2 = torch.autograd.grad(got_x.pow(2).sum(), params)
    for g, w in zip(got2, want2, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)


def test_chunked_loss_refuses_second_order_gradients():
    hidden = torch.randn(4, 8, requires_grad=True)
    loss = linear_cross_entropy(hidden, torch.randn(VOCAB, 8), None, torch.arange(4), shift=False)
    with pytest.raises(RuntimeError, match="first-order gradients only"):
        torch.autograd.grad(loss, hidden, create_graph=True)


def test_chunks_are_even_and_within_the_logits_budget(monkeypatch):
    monkeypatch.setattr(losses, "CHUNK_ELEMENTS", 1 << 24)
    assert losses._chunk_rows(1024, 50257) == 256  # 333 rows fit: 4 chunks of 256
    monkeypatch.setattr(losses, "CHUNK_ELEMENTS", 4 * VOCAB)
    for n in range(1, 30):
        rows = losses._chunk_rows(n, VOCAB)
        chunks = -(-n // rows)
        assert rows <= 4 and chunks == -(-n // 4)  # no more chunks than 4-row ones
        assert n - (chunks - 1) * rows > 0  # the last chunk is not empty


def test_bf16_chunked_loss_gradients_match_float64(monkeypatch):
    """bf16 inputs: the weight and bias gradients summed over chunks in fp32 stay within
    bf16 rounding of the float64 computation on the same values."""
    monkeypatch.setattr(losses, "CHUNK_ELEMENTS", 3 * VOCAB)
    torch.manual_seed(0)
    hidden = torch.randn(5, 4, 16).bfloat16().requires_grad_()
    weight = (0.2 * torch.randn(VOCAB, 16)).bfloat16().requires_grad_()
    bias = torch.randn(VOCAB).bfloat16().requires_grad_()
    labels = torch.randint(0, VOCAB, (5, 4))
    labels[2, 1:] = -100
    loss = linear_cross_entropy(hidden, weight, bias, labels, shift=False, label_smoothing=0.1)
    got = torch.autograd.grad(loss, (hidden, weight, bias))
    exact = [t.detach().double().requires_grad_() for t in (hidden, weight, bias)]
    plain = F.cross_entropy(
        F.linear(exact[0], exact[1], exact[2]).reshape(-1, VOCAB),
        labels.reshape(-1),
        label_smoothing=0.1,
    )
    want = torch.autograd.grad(plain, exact)
    torch.testing.assert_close(loss.double(), plain, rtol=0, atol=2e-2)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == torch.bfloat16
        torch.testing.assert_close(g.double(), w, rtol=2e-2, atol=2e-3)
