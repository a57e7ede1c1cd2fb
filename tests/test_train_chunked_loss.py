"""`zoo train`'s loss: the head's chunked token loss (no (B, T, V) logits) equals the summed
cross-entropy of the full logits, in value and gradients, for every objective it trains."""

from __future__ import annotations

import random

import pytest
import torch
import torch.nn.functional as F

import archzoo
from archzoo.plugins.head import losses
from archzoo.plugins.head.lm import LMHead
from archzoo.plugins.head.mlm import MLMHead
from archzoo.training import TrainConfig, train
from archzoo.training.loop import batch_loss
from archzoo.training.objectives import IGNORE

VOCAB = 41
SMALL = {"n_layers": 1, "d_model": 32, "n_heads": 4, "d_ff": 64, "vocab_size": VOCAB}
SMALL.update(max_len=32, dropout=0.0)
MODELS = {"causal": "gpt2", "mlm": "bert-base", "denoising": "transformer-base"}
CPU = torch.device("cpu")


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch):
    """Chunks of 4 rows: every batch below spans several chunks and a ragged last one."""
    monkeypatch.setattr(losses, "CHUNK_ELEMENTS", 4 * VOCAB)


def make_batch(objective: str, g: torch.Generator) -> dict[str, torch.Tensor]:
    """A batch as the objectives make it: aligned labels, -100 where nothing is scored."""
    x = torch.randint(4, VOCAB, (3, 10), generator=g)
    if objective == "causal":  # inputs and next tokens
        y = torch.randint(4, VOCAB, (3, 10), generator=g)
        return {"input_ids": x, "labels": y}
    pick = torch.rand(3, 10, generator=g) < 0.3
    pick[0, 0] = True  # at least one scored token
    source = torch.where(pick, 3, x)  # id 3 plays the mask token
    if objective == "mlm":
        return {"input_ids": source, "labels": torch.where(pick, x, IGNORE)}
    start = torch.full_like(x[:, :1], 1)
    decoder = torch.cat([start, x[:, :-1]], dim=1)  # (b, T) teacher forcing
    return {"input_ids": source, "decoder_input_ids": decoder, "labels": x}


def reference_loss(model, batch, smoothing: float, num_items: float) -> torch.Tensor:
    """The plain computation: full (B, T, V) logits, torch's summed cross-entropy / num_items."""
    inputs = {k: v for k, v in batch.items() if k != "labels"}
    logits = model(**inputs).logits  # (B, T, V)
    summed = F.cross_entropy(
        logits.reshape(-1, VOCAB),
        batch["labels"].reshape(-1),
        ignore_index=IGNORE,
        label_smoothing=smoothing,
        reduction="sum",
    )
    return summed / num_items


def grads(model) -> dict[str, torch.Tensor]:
    out = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    return out


@pytest.mark.parametrize("smoothing", [0.0, 0.1], ids=["plain", "smoothed"])
@pytest.mark.parametrize("objective", list(MODELS))
def test_train_loss_and_gradients_equal_the_full_logits_loss(objective, smoothing):
    torch.manual_seed(0)
    model = archzoo.build_model(MODELS[objective], SMALL)
    batch = make_batch(objective, torch.Generator().manual_seed(1))
    count = float((batch["labels"] != IGNORE).sum())
    want = reference_loss(model, batch, smoothing, count / 2)  # as one of two ranks
    want.backward()
    want_grads = grads(model)
    got = batch_loss(model, dict(batch), CPU, smoothing, count / 2)
    got.backward()
    got_grads = grads(model)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-6)
    assert got_grads.keys() == want_grads.keys() and len(want_grads) > 8
    for name, g in want_grads.items():
        torch.testing.assert_close(got_grads[name], g, rtol=0, atol=1e-6, msg=name)


def test_a_batch_with_nothing_scored_is_a_zero_loss_not_nan():
    torch.manual_seed(0)
    model = archzoo.build_model("bert-base", SMALL)
    batch = make_batch("mlm", torch.Generator().manual_seed(1))
    batch["labels"][:] = IGNORE
    loss = batch_loss(model, batch, CPU, 0.1, 4.0)
    assert loss.item() == 0.0
    loss.backward()
    assert all(p.grad is None or not p.grad.any() for p in model.parameters())


def write_corpus(path) -> str:
    rng = random.Random(0)
    words = "the quick brown fox jumps over a lazy dog while my cat sat".split()
    path.write_text("\n".join(" ".join(rng.choice(words) for _ in range(9)) for _ in range(80)))
    return str(path)


@pytest.mark.parametrize("name", ["gpt2", "bert-base"])
def test_zoo_train_never_makes_full_vocabulary_logits(tmp_path, monkeypatch, name):
    """The head's full forward sees one probe token (the vocabulary check), never a batch."""
    seen: list[tuple[int, ...]] = []
    for head in (LMHead, MLMHead):
        full = head.forward

        def spy(self, hidden, *args, _full=full, **kw):
            seen.append(tuple(hidden.shape))
            return _full(self, hidden, *args, **kw)

        monkeypatch.setattr(head, "forward", spy)
    cfg = TrainConfig(
        data=[write_corpus(tmp_path / "c.txt")],
        out=str(tmp_path / "run"),
        steps=2,
        batch=4,
        seq_len=16,
        eval_every=2,
        eval_examples=2,
        progress=False,
        label_smoothing=0.1,
    )
    history = train(name, cfg, {**SMALL, "vocab_size": 260})["history"]
    assert seen == [(1, 1, 32)]  # the probe before training; no (B, T, V) afterwards
    assert all(h["loss"] > 0 for h in history) and "eval_loss" in history[-1]
