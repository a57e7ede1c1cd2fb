"""`zoo train --optimizer muon`: Muon on the blocks' hidden matrices, AdamW on the rest.

Oracles: torch.optim.Muon and AdamW run by hand on the same groups, Muon's update written
out from its formula (Newton-Schulz on the Nesterov momentum), the uninterrupted run
(resume), and the exact refusal message.
"""

from __future__ import annotations

import copy
import json
import math
from types import SimpleNamespace

import pytest
import torch
from click.testing import CliRunner
from test_train import DECODER, config, write_corpus

import archzoo
from archzoo.cli.main import main
from archzoo.training import read_metrics, train
from archzoo.training.optimizers import Optimizers, make_optimizers, muon_parameters

SPEC = {  # Llama-like, with per-head q/k norms: 2-D gains that are not hidden matrices
    "name": "tiny-llama",
    "family": "decoder",
    "vocab_size": 50,
    "d_model": 32,
    "n_heads": 4,
    "d_ff": 48,
    "n_layers": 2,
    "max_len": 32,
    "dropout": 0.0,
    "position": "rotary",
    "attention": {"kind": "mha", "n_kv_heads": 2, "bias": True, "qk_norm": "each_head"},
    "norm": "rmsnorm",
    "block": "pre_ln",
    "ffn": {"kind": "glu", "activation": "swiglu"},
    "head": {"kind": "lm", "tie": False},
}
CFG = SimpleNamespace(optimizer="muon", lr=0.02, weight_decay=0.1, beta1=0.9, beta2=0.95)


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def model_with_grads(seed: int = 0) -> archzoo.ZooModel:
    torch.manual_seed(seed)
    model = archzoo.build_model(SPEC)
    ids = torch.randint(0, 50, (2, 12))
    model(ids, labels=ids).loss.backward()
    return model


def test_muon_takes_the_hidden_matrices_and_adamw_the_rest() -> None:
    model = model_with_grads()
    names = {id(p): n for n, p in model.named_parameters()}
    hidden = sorted(names[id(p)] for p in muon_parameters(model))
    assert hidden == sorted(
        f"decoder.blocks.{i}.{part}.weight"
        for i in range(2)
        for part in ("attention.qkv", "attention.out", "ffn.gate", "ffn.up", "ffn.down")
    )
    muon, adamw = make_optimizers(model, CFG)
    assert isinstance(muon, torch.optim.Muon) and isinstance(adamw, torch.optim.AdamW)
    rest = {names[id(p)] for g in adamw.param_groups for p in g["params"]}
    assert rest == set(names.values()) - set(hidden)  # every other weight, each once
    assert "decoder.embedding.word.weight" in rest and "head.proj.weight" in rest
    assert "decoder.blocks.0.attention.q_norm.weight" in rest  # (H, hd) gains: AdamW
    decay = {names[id(p)] for p in adamw.param_groups[0]["params"]}
    assert decay == {"decoder.embedding.word.weight", "head.proj.weight"}  # no norm gains
    assert adamw.param_groups[1]["weight_decay"] == 0.0


def test_a_step_equals_torch_muon_and_adamw_run_by_hand() -> None:
    model = model_with_grads()
    by_hand = copy.deepcopy(model)  # the same weights (deepcopy leaves gradients out)
    for p, q in zip(model.parameters(), by_hand.parameters(), strict=True):
        q.grad = p.grad.clone()
    opts = Optimizers(make_optimizers(model, CFG), lambda step: 1.0)
    opts.step()
    names = dict(by_hand.named_parameters())
    hidden = {n for n, p in names.items() if ".blocks." in n and p.dim() == 2 and "norm" not in n}
    muon = torch.optim.Muon(
        [names[n] for n in sorted(hidden, key=list(names).index)],
        lr=CFG.lr,
        weight_decay=CFG.weight_decay,
        momentum=0.95,
        nesterov=True,
        adjust_lr_fn="match_rms_adamw",
    )
    rest = [n for n in names if n not in hidden]
    decay = [n for n in rest if names[n].dim() >= 2 and "norm" not in n]
    adamw = torch.optim.AdamW(
        [
            {"params": [names[n] for n in decay], "weight_decay": CFG.weight_decay},
            {"params": [names[n] for n in rest if n not in decay], "weight_decay": 0.0},
        ],
        lr=CFG.lr,
        betas=(CFG.beta1, CFG.beta2),
    )
    muon.step()
    adamw.step()
    for (name, got), want in zip(model.named_parameters(), by_hand.parameters(), strict=True):
        assert (got - want).abs().max() <= 1e-7, name


def newton_schulz(g: torch.Tensor, steps: int = 5, eps: float = 1e-7) -> torch.Tensor:
    """Keller Jordan's quintic iteration toward the orthogonal factor of g (rows <= cols)."""
    a, b, c = 3.4445, -4.7750, 2.0315
    tall = g.shape[0] > g.shape[1]
    x = g.T if tall else g
    x = x / (x.norm() + eps)
    for _ in range(steps):
        gram = x @ x.T
        x = a * x + (b * gram + c * gram @ gram) @ x
    return x.T if tall else x


def test_muons_update_on_a_matrix_is_the_formula() -> None:
    """W <- W (1 - lr wd) - lr 0.2 sqrt(max(A, B)) NS(momentum) (match_rms_adamw), NS the
    quintic Newton-Schulz iteration written out here in float64. torch iterates in bfloat16:
    within 3% (the gradient's own direction is 45% off); a zero gradient decays exactly."""
    model = model_with_grads()
    w = model.decoder.blocks[0].ffn.down.weight  # (d_model, d_ff): 32 x 48
    z = model.decoder.blocks[1].ffn.down.weight
    w.grad = torch.randn(w.shape, generator=torch.Generator().manual_seed(0))
    z.grad = torch.zeros_like(z)
    w0, z0, g = w.detach().clone(), z.detach().clone(), w.grad.clone()
    Optimizers(make_optimizers(model, CFG), lambda step: 1.0).step()
    assert torch.equal(z.detach(), z0 * (1 - CFG.lr * CFG.weight_decay))
    step = (w0 * (1 - CFG.lr * CFG.weight_decay) - w.detach()) / (
        CFG.lr * 0.2 * math.sqrt(max(w.shape))
    )
    ortho = newton_schulz(g.double()).float()  # the momentum's direction is g's at step 1
    assert (step - ortho).norm() / ortho.norm() <= 0.03
    assert (step - g / g.norm() * ortho.norm()).norm() / ortho.norm() >= 0.3


def test_zoo_train_with_muon_reduces_the_loss(tmp_path) -> None:
    data = write_corpus(tmp_path / "c.txt")
    cfg = config(tmp_path, data, steps=16, eval_every=8, optimizer="muon", lr=0.01)
    result = train(DECODER[0], cfg, DECODER[1])
    losses = [h["loss"] for h in result["history"]]
    evals = [h["eval_loss"] for h in result["history"] if "eval_loss" in h]
    assert math.log(260) - 0.5 < losses[0] < math.log(260) + 1.0  # starts near uniform
    assert sum(losses[-3:]) / 3 < losses[0] - 1.0  # and falls well below it
    assert evals[1] < evals[0]
    from safetensors import safe_open

    with safe_open(str(tmp_path / "run/checkpoint.safetensors"), "pt") as f:
        meta, names = f.metadata(), list(f.keys())
    assert meta["optimizer"] == "muon" and json.loads(meta["info"])["config"]["optimizer"] == "muon"
    assert any(n.endswith(".momentum_buffer") for n in names)  # Muon's state
    assert any(n.endswith(".exp_avg_sq") for n in names)  # AdamW's
    assert len(json.loads(meta["scheduler"])) == 2  # one schedule per optimizer


def test_a_muon_run_resumes_exactly(tmp_path) -> None:
    data = write_corpus(tmp_path / "c.txt")
    kw = dict(steps=6, eval_every=3, save_every=2, optimizer="muon", lr=0.01)
    straight = train(DECODER[0], config(tmp_path / "a", data, **kw), DECODER[1])["history"]
    out = tmp_path / "b"  # stopped after step 3: resumes from the step-2 checkpoint
    train(DECODER[0], config(out, data, stop_at=3, **kw), DECODER[1])
    train(DECODER[0], config(out, data, resume=True, **kw), DECODER[1])
    resumed = read_metrics(out / "run")
    assert [r["step"] for r in resumed] == list(range(1, 7))
    for a, b in zip(straight, resumed, strict=True):
        assert (a["loss"], a["lr"], a.get("eval_loss")) == (b["loss"], b["lr"], b.get("eval_loss"))


@pytest.mark.parametrize(("first", "then"), [("muon", "adamw"), ("adamw", "muon")])
def test_resuming_with_the_other_optimizer_is_refused(tmp_path, first: str, then: str) -> None:
    data = write_corpus(tmp_path / "c.txt", lines=50)
    run = tmp_path / "run"
    args = ["train", "gpt2", "--data", str(data), "--out", str(run), "--steps", "2"]
    args += ["--seq-len", "16", "--no-progress", "--set", "vocab_size=260"]
    for key, value in {"n_layers": 1, "d_model": 16, "n_heads": 2, "d_ff": 32}.items():
        args += ["--set", f"{key}={value}"]
    done = CliRunner().invoke(main, [*args, "--optimizer", first, "--stop-at", "1"])
    assert done.exit_code == 0, done.output
    again = CliRunner().invoke(main, [*args, "--optimizer", then, "--resume"])
    assert again.exit_code == 2, again.output
    assert (
        f"--resume {run}: the run was trained with --optimizer {first}; it cannot continue "
        f"with --optimizer {then}"
    ) in " ".join(again.output.split())
    assert "Traceback" not in again.output


def test_muon_under_fsdp_is_refused_before_training(tmp_path) -> None:
    data = write_corpus(tmp_path / "c.txt", lines=50)
    with pytest.raises(ValueError, match="--optimizer muon does not run under --fsdp"):
        train(DECODER[0], config(tmp_path, data, optimizer="muon", fsdp=True), DECODER[1])
