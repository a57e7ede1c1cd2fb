"""muP (`mup: {base_width: N}`): coordinate check across widths, init stds, per-group Adam
learning rates, the 1/head_dim attention scale and the output multiplier, against formulas."""

from __future__ import annotations

import random

import pytest
import torch
from click.testing import CliRunner

import archzoo
from archzoo.cli.main import main
from archzoo.errors import SpecError
from archzoo.model.builder import hidden_matrix_names
from archzoo.training.config import TrainConfig
from archzoo.training.loop import optimizer_for

BASE = 64
STEPS = 4
LR = 3e-3
WIDTHS = (64, 128, 256, 512)


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def spec(width: int, use_mup: bool, **changes):
    data = {
        "name": f"w{width}",
        "family": "decoder",
        "vocab_size": 128,
        "d_model": width,
        "n_layers": 2,
        "n_heads": 4,  # head_dim grows with the width, as muP's 1/head_dim scale assumes
        "max_len": 32,
        "dropout": 0.0,
        "head": {"kind": "lm", "tie": True},
        "mup": {"base_width": BASE} if use_mup else None,
        **changes,
    }
    return archzoo.load_spec(data)


def change_after_steps(width: int, mup: bool) -> tuple[float, float]:
    """Mean |change| of the logits and of the residual stream after block 0 (before any final
    norm) on fixed inputs, after STEPS Adam steps at lr LR on a fixed random-token batch."""
    torch.manual_seed(0)
    s = spec(width, mup)
    model = archzoo.build_model(s)
    ids = torch.randint(0, 128, (4, 16), generator=torch.Generator().manual_seed(1))
    opt = optimizer_for(model, TrainConfig(lr=LR, weight_decay=0.0), s)
    with torch.no_grad():
        before = model(ids, output_hidden_states=True)
    for _ in range(STEPS):
        model(ids, labels=ids).loss.backward()
        opt.step()
        opt.zero_grad()
    with torch.no_grad():
        after = model(ids, output_hidden_states=True)
    logits = (after.logits - before.logits).abs().mean().item()
    hidden = (after.hidden_states[1] - before.hidden_states[1]).abs().mean().item()
    return logits, hidden


def spread(values: list[float]) -> float:
    return max(values) / min(values)


def test_coordinate_check_flat_with_mup_and_growing_without():
    """muP keeps each coordinate's update Theta(1) in width, so the changes agree across an 8x
    width range up to finite-width noise (measured: logits 1.6x, hidden 1.1x; bound 2). The
    standard parametrisation with Adam moves each hidden coordinate by about lr x fan_in, so
    the change grows with the width (measured: logits 4.3x, hidden 25x; bound 3)."""
    mup = [change_after_steps(w, True) for w in WIDTHS]
    sp = [change_after_steps(w, False) for w in WIDTHS]
    for i, what in enumerate(("logits", "hidden")):
        assert spread([m[i] for m in mup]) < 2.0, (what, mup)
        assert spread([s[i] for s in sp]) > 3.0, (what, sp)
        assert sp[-1][i] > 3.0 * sp[0][i], (what, sp)  # grows, not merely spreads


def test_init_std_of_hidden_matrices_is_scaled_by_inverse_sqrt_ratio():
    """With the same seed, muP's weights are the standard ones, hidden matrices x 1/sqrt(r)."""
    width, ratio = 256, 256 / BASE
    torch.manual_seed(0)
    sp = archzoo.build_model(spec(width, False))
    torch.manual_seed(0)
    mup_spec = spec(width, True)
    mup = archzoo.build_model(mup_spec)
    hidden = set(hidden_matrix_names(mup_spec, mup))
    expected = {  # q/k/v (fused), attention out, FFN in and out, in both layers
        f"decoder.blocks.{i}.{name}.weight"
        for i in range(2)
        for name in ("attention.qkv", "attention.out", "ffn.fc_in", "ffn.fc_out")
    }
    assert hidden == expected
    sp_params = dict(sp.named_parameters())
    for name, p in mup.named_parameters():
        factor = ratio**-0.5 if name in hidden else 1.0
        torch.testing.assert_close(p, sp_params[name] * factor, rtol=0, atol=0)
    w = dict(mup.named_parameters())["decoder.blocks.0.ffn.fc_in.weight"]
    assert abs(w.std().item() - 0.02 / ratio**0.5) < 0.02 * 0.02  # 0.01, within 2%
    emb = mup.decoder.embedding.word_weight()
    assert abs(emb.std().item() - 0.02) < 0.02 * 0.05  # input weights keep init_std


def test_adam_learning_rate_per_group_and_first_step_size():
    """Hidden matrices train at lr / r with decay x r; embeddings, norms and biases at lr.
    Adam's first step moves each coordinate by about its group's lr (g / |g|)."""
    width, ratio, lr = 256, 4.0, 1e-3
    torch.manual_seed(0)
    s = spec(width, True)
    model = archzoo.build_model(s)
    opt = optimizer_for(model, TrainConfig(lr=lr, weight_decay=0.1), s)
    by_id = {id(p): name for name, p in model.named_parameters()}
    groups = {
        frozenset(by_id[id(p)] for p in g["params"]): (g["lr"], g["weight_decay"])
        for g in opt.param_groups
    }
    hidden = frozenset(hidden_matrix_names(s, model))
    assert groups[hidden] == (pytest.approx(lr / ratio), pytest.approx(0.1 * ratio))
    assert opt.param_groups[0]["lr"] == lr  # what the training log reports
    others = {name for names in groups if names != hidden for name in names}
    assert "decoder.embedding.word.weight" in others
    assert all(lr_wd[0] == lr for names, lr_wd in groups.items() if names != hidden)
    opt = optimizer_for(model, TrainConfig(lr=lr, weight_decay=0.0), s)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    ids = torch.randint(0, 128, (2, 16), generator=torch.Generator().manual_seed(1))
    model(ids, labels=ids).loss.backward()
    opt.step()
    params = dict(model.named_parameters())
    step = {n: (params[n] - before[n]).abs().max().item() for n in params}
    fc_in = "decoder.blocks.0.ffn.fc_in.weight"
    assert step[fc_in] == pytest.approx(lr / ratio, rel=1e-3)
    assert step["decoder.embedding.word.weight"] == pytest.approx(lr, rel=1e-3)


@pytest.mark.parametrize(
    "family, head", [("decoder", {"kind": "lm", "tie": True}), ("encoder", {"kind": "mlm"})]
)
def test_attention_scale_and_output_multiplier_against_the_standard_model(family, head):
    """muP's logits = (the standard model with attention.scale = 1/head_dim, same weights)'s
    logits x base_width / d_model (Tensor Programs V: 1/d attention, 1/r readout); the MLM
    head's decoder bias starts at zero, so the multiplier shows on the logits whole."""
    width = 256
    head_dim = width // 4
    parts = {"family": family, "head": head}
    torch.manual_seed(0)
    mup = archzoo.build_model(spec(width, True, **parts))
    scaled = {"kind": "mha", "scale": 1 / head_dim}
    ref = archzoo.build_model(spec(width, False, attention=scaled, **parts))
    ref.load_state_dict(mup.state_dict())
    ids = torch.randint(0, 128, (2, 16), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        got, want = mup(ids).logits, ref(ids).logits * (BASE / width)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    std = archzoo.build_model(spec(width, False, **parts))
    std.load_state_dict(mup.state_dict())
    with torch.no_grad():  # the standard 1/sqrt(head_dim) differs: the scale really changed
        assert not torch.allclose(std(ids).logits * (BASE / width), got, atol=1e-4)


def test_at_the_base_width_only_the_attention_scale_differs():
    torch.manual_seed(0)
    mup = archzoo.build_model(spec(BASE, True))
    torch.manual_seed(0)
    ref = archzoo.build_model(spec(BASE, False, attention={"kind": "mha", "scale": 1 / 16}))
    for (name, a), (_, b) in zip(mup.named_parameters(), ref.named_parameters(), strict=True):
        assert torch.equal(a, b), name
    ids = torch.randint(0, 128, (1, 8), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        torch.testing.assert_close(mup(ids).logits, ref(ids).logits, rtol=0, atol=0)


def test_mup_spec_errors_name_the_key():
    with pytest.raises(SpecError) as e:
        spec(128, False, mup={"base_widht": 64})
    assert "mup.base_widht: unknown key of mup; known: base_width (did you mean 'base_width'?)" in (
        str(e.value)
    )
    assert "mup.base_width: is required when mup is set" in str(e.value)
    with pytest.raises(SpecError, match=r"mup: must be null or a mapping \{base_width: N\}, got 5"):
        spec(128, False, mup=5)
    with pytest.raises(SpecError, match="mup.base_width: must be >= 1, got 0"):
        spec(128, False, mup={"base_width": 0})
    with pytest.raises(SpecError) as e:
        archzoo.load_spec("deberta-base", overrides={"mup.base_width": 64})
    assert "<override mup.base_width>" in str(e.value)
    assert "attention 'disentangled' does not apply muP's 1/head_dim attention scale" in str(
        e.value
    )
    with pytest.raises(SpecError, match="head 'token_classifier' does not apply muP's output"):
        archzoo.load_spec("gpt2", overrides={"mup.base_width": 64, "head": "token_classifier"})


def test_zoo_train_mup_base_width_is_the_spec_key(tmp_path):
    rng = random.Random(0)
    data = tmp_path / "c.txt"
    data.write_text("\n".join(" ".join(rng.choice("abcdef") for _ in range(8)) for _ in range(60)))
    args = ["train", "gpt2", "--data", str(data), "--out", str(tmp_path / "run")]
    args += ["--steps", "1", "--batch", "2", "--seq-len", "8", "--eval-examples", "1"]
    args += ["--no-progress", "--mup-base-width", "8"]
    for s in ("n_layers=1", "d_model=16", "n_heads=2", "vocab_size=260", "max_len=16"):
        args += ["--set", s]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    model = archzoo.load(tmp_path / "run" / "model.safetensors")
    assert model.spec.data["mup"] == {"base_width": 8}
    assert model.head.multiplier == 0.5  # base_width / d_model on the logits
