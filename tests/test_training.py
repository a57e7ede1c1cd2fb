"""Training: a tiny GPT learns a counting sequence; `labels` give the reference cross-entropy."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import archzoo

VOCAB = 32
TINY_GPT = {
    "n_layers": 2,
    "d_model": 64,
    "n_heads": 4,
    "d_ff": 128,
    "vocab_size": VOCAB,
    "max_len": 64,
    "dropout": 0.0,
}
TINY_ENCODER_DECODER = {
    "name": "tiny-encoder-decoder",
    "family": "encoder-decoder",
    "vocab_size": 50,
    "d_model": 32,
    "n_layers": 2,
    "n_heads": 4,
    "d_ff": 64,
    "max_len": 64,
    "dropout": 0.0,
    "tie_embeddings": True,
    "embedding": {"kind": "token", "scale": True},
    "position": "sinusoidal",
    "attention": {"kind": "mha"},
    "block": "post_ln",
    "norm": "layernorm",
    "ffn": {"kind": "mlp", "activation": "relu"},
    "head": {"kind": "lm", "tie": True},
}


@pytest.fixture
def one_thread():
    """Tiny matmuls run fastest on one thread (no sync overhead, no contention)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def counting_batch(gen: torch.Generator, batch: int = 16, T: int = 32) -> torch.Tensor:
    """Rows `(start + arange(T)) % VOCAB` for random starts: each token predicts the next."""
    starts = torch.randint(0, VOCAB, (batch, 1), generator=gen)
    return (starts + torch.arange(T)) % VOCAB  # (B, T)


def test_tiny_gpt_cuts_loss_on_counting_sequence_at_least_five_fold(one_thread):
    torch.manual_seed(0)
    model = archzoo.build_model("gpt2", TINY_GPT)
    assert model.spec.data["block"]["kind"] == "pre_ln"
    gen = torch.Generator().manual_seed(1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    model.train()
    losses = []
    for _ in range(60):
        ids = counting_batch(gen)
        loss = model(ids, labels=ids).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        ids = counting_batch(gen)
        final = model(ids, labels=ids).loss.item()
    initial = losses[0]
    assert abs(initial - torch.log(torch.tensor(float(VOCAB))).item()) < 0.5  # ~uniform at init
    assert final <= initial / 5, f"loss {initial:.3f} -> {final:.3f} (x{initial / final:.1f})"


def test_decoder_loss_is_shifted_cross_entropy_ignoring_minus_100():
    torch.manual_seed(0)
    model = archzoo.build_model("gpt2", TINY_GPT).eval()
    ids = torch.randint(0, VOCAB, (3, 10))
    labels = ids.clone()
    labels[0, 3:6] = -100
    labels[2, -1] = -100
    out = model(ids, labels=labels)
    # position t predicts label t+1; ignored labels leave the mean
    logits, targets = out.logits[:, :-1], labels[:, 1:]
    keep = targets != -100
    picked = -logits.float().log_softmax(-1).gather(-1, targets.clamp_min(0)[..., None])[..., 0]
    expected = picked[keep].mean()
    torch.testing.assert_close(out.loss, expected, rtol=1e-6, atol=1e-6)
    ce = F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1), ignore_index=-100)
    torch.testing.assert_close(out.loss, ce, rtol=1e-6, atol=1e-6)
    unshifted = F.cross_entropy(
        out.logits.reshape(-1, VOCAB), labels.reshape(-1), ignore_index=-100
    )
    assert not torch.allclose(out.loss, unshifted)


def test_encoder_decoder_loss_is_unshifted_cross_entropy_ignoring_minus_100():
    torch.manual_seed(0)
    model = archzoo.build_model(TINY_ENCODER_DECODER).eval()
    src = torch.randint(0, 50, (2, 7))
    tgt = torch.randint(0, 50, (2, 5))
    labels = torch.randint(0, 50, (2, 5))
    labels[1, 2:] = -100
    out = model(src, decoder_input_ids=tgt, labels=labels)
    assert out.logits.shape == (2, 5, 50)
    keep = labels != -100
    picked = -out.logits.float().log_softmax(-1).gather(-1, labels.clamp_min(0)[..., None])[..., 0]
    torch.testing.assert_close(out.loss, picked[keep].mean(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("ffn", ["mlp", "glu"])
def test_dropout_modules_switched_to_train_still_drop_in_an_eval_model(ffn):
    """Monte Carlo dropout: an eval model whose nn.Dropout modules alone are set to train
    drops at every site (the eval fast path skips a dropout only when that module is off)."""
    model = archzoo.build_model("gpt2", {**TINY_GPT, "dropout": 0.5, "ffn": ffn}).eval()
    ids = torch.randint(0, TINY_GPT["vocab_size"], (1, 8), generator=torch.Generator())
    with torch.no_grad():
        assert torch.equal(model(ids).logits, model(ids).logits)
        dropouts = [m for m in model.modules() if isinstance(m, torch.nn.Dropout)]
        for m in dropouts:
            m.train()
        ran: set[int] = set()
        hooks = [m.register_forward_hook(lambda m, *_: ran.add(id(m))) for m in dropouts]
        torch.manual_seed(0)
        first = model(ids).logits
        for h in hooks:
            h.remove()
        assert not torch.equal(first, model(ids).logits)
    assert ran == {id(m) for m in dropouts}  # every dropout module ran


@pytest.mark.parametrize("spec", ["gpt2", "encoder-decoder"])
def test_pre_ln_written_out_forward_is_the_generic_residual_path(spec, monkeypatch):
    """PreLNBlock.forward spells out Block.forward through `residual` (the decoding hot
    path): the same logits and gradients, dropout included, with and without cross-attention."""
    from archzoo.parts.interfaces import Block
    from archzoo.plugins.block.pre_ln import PreLNBlock

    if spec == "gpt2":
        model = archzoo.build_model("gpt2", {**TINY_GPT, "dropout": 0.3})
        args = (torch.randint(0, TINY_GPT["vocab_size"], (2, 8), generator=torch.Generator()),)
        kwargs = {}
    else:
        data = {**TINY_ENCODER_DECODER, "dropout": 0.3, "block": "pre_ln"}
        model = archzoo.build_model(data)
        args = (torch.randint(0, 50, (2, 7), generator=torch.Generator()),)
        kwargs = {"decoder_input_ids": torch.randint(0, 50, (2, 5), generator=torch.Generator())}
    blocks = [m for m in model.modules() if isinstance(m, PreLNBlock)]
    assert blocks and any(b.cross_attention is not None for b in blocks) == (spec != "gpt2")

    def run() -> tuple[torch.Tensor, list[torch.Tensor]]:
        model.zero_grad()
        torch.manual_seed(0)
        logits = model(*args, **kwargs).logits
        logits.square().mean().backward()
        return logits.detach(), [p.grad.clone() for p in model.parameters() if p.grad is not None]

    fast = run()
    monkeypatch.setattr(PreLNBlock, "forward", Block.forward)
    generic = run()
    assert torch.equal(fast[0], generic[0])
    assert all(torch.equal(a, b) for a, b in zip(fast[1], generic[1], strict=True))
