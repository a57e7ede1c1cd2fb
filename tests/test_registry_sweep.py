"""Registry sweep (timm-style): every zoo spec builds, every component trains in a tiny model.

Components are parametrised by `kind:name` straight from the registry, so a newly registered
component is swept without touching this file; a component kind the sweep cannot place, or a
head whose outputs it does not know, fails with a message saying what to add here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
import torch
from conftest import tiny

import archzoo
from archzoo import Component

TINY = tiny()
BATCH, SRC_LEN, TGT_LEN = 2, 20, 14
# The head a family is built with when the component under test is not a head.
DEFAULT_HEAD = {"decoder": "lm", "encoder-decoder": "lm", "encoder": "mlm"}
# Component parameters a tiny model needs where a default does not fit it: {"kind:name": {...}}.
TINY_PARAMS: dict[str, dict] = {
    "attention:block_local": {"radius": 3},  # several blocks of 4 in SRC_LEN
    "block:bottleneck": {"inner_dim": 16, "attention_input": "inner", "n_ffn": 2},
    "attention:transient_global": {"radius": 3, "global_block": 4},
    "attention:side_by_side": {  # Falcon-H1's layer: Mamba 2 beside attention
        "mixers": [
            {"kind": "mamba2", "d_inner": 32, "head_dim": 8, "state_size": 8, "chunk_size": 4},
            {"kind": "mha", "n_kv_heads": 1},
        ]
    },
}
# Components that only work together: the spec slots a component under test brings along.
PARTNERS: dict[str, dict] = {
    "position:deberta_relative": {"attention": "disentangled"},
    "attention:disentangled": {"position": "deberta_relative"},
    "ffn:none": {"block": {"kind": "pre_ln", "ffn_norm": False}},  # no FFN, no norm for it
    "attention:none": {"block": {"kind": "pre_ln", "attention_norm": False}},  # no mixer either
    # the predicting streams it reads, which only it can read
    "attention:ngram_streams": {"embedding": {"kind": "token", "predict_streams": 2}},
}
# Kinds placed in a decoder and an encoder-decoder model (attention adjusts by capability).
STACK_KINDS = ("embedding", "position", "attention", "norm", "block", "ffn", "sharing")


@dataclass(frozen=True)
class HeadOutput:
    """What a head's logits look like and how its labels are drawn."""

    per_token: bool  # logits (B, T, n) rather than (B, n)
    classes: str  # "vocab", "num_labels" (from the head config), "positions" (a span) or
    # "choices" (the batch's rows are one example's choices: inputs (1, BATCH, T))


HEAD_OUTPUTS: dict[str, HeadOutput | None] = {
    "lm": HeadOutput(per_token=True, classes="vocab"),
    "mlm": HeadOutput(per_token=True, classes="vocab"),
    "classifier": HeadOutput(per_token=False, classes="num_labels"),
    "token_classifier": HeadOutput(per_token=True, classes="num_labels"),
    # start_logits / end_logits (B, T); labels (B, 2) start and end positions
    "question_answering": HeadOutput(per_token=True, classes="positions"),
    "multiple_choice": HeadOutput(per_token=False, classes="choices"),  # logits (1, BATCH)
    "discriminator": HeadOutput(per_token=True, classes="binary"),  # one logit per token (B, T)
    "none": None,  # no logits: the loss is a fixed projection of last_hidden_state
    "sentence_embedding": None,  # no logits: a pooled vector beside last_hidden_state
}


def component_ids() -> list[str]:
    return sorted(f"{cls.kind}:{cls.name}" for cls in archzoo.list_components())


def families_for(cls: type[Component]) -> tuple[str, ...]:
    """The model families a component is swept in."""
    if cls.kind == "head":
        return tuple(cls.families)
    if cls.kind == "attention":
        caps = cls.capabilities
        if not caps.causal:
            return ("encoder",)
        both = caps.bidirectional and caps.cross  # a decoder stack's cross-attention too
        return ("decoder", "encoder-decoder") if both else ("decoder",)
    if cls.kind == "block" and not cls.capabilities.cross_layer:
        return ("decoder",)  # no cross-attention: no encoder-decoder
    if cls.kind in STACK_KINDS:
        return ("decoder", "encoder-decoder")
    pytest.fail(
        f"the registry sweep does not know where to place a {cls.kind!r} component "
        f"({cls.kind}:{cls.name}); teach families_for() in tests/test_registry_sweep.py"
    )


def tiny_spec(cls: type[Component], family: str) -> dict:
    """A tiny spec of `family` whose `cls.kind` slot holds the component under test."""
    comp = {"kind": cls.name, **TINY_PARAMS.get(f"{cls.kind}:{cls.name}", {})}
    spec = {"name": f"tiny-{cls.kind}-{cls.name}", "family": family, **TINY}
    spec["head"] = {"kind": DEFAULT_HEAD[family]}
    spec[cls.kind] = comp
    spec.update(PARTNERS.get(f"{cls.kind}:{cls.name}", {}))
    return spec


def make_labels(head: str, cfg: dict, shape: tuple[int, ...], g: torch.Generator) -> tuple:
    """Labels for the head and the number of classes its cross-entropy ranges over."""
    out = HEAD_OUTPUTS[head]
    if out.classes == "positions":
        return torch.randint(0, shape[1], (shape[0], 2), generator=g), shape[1]
    if out.classes == "binary":
        return torch.randint(0, 2, shape, generator=g).float(), 2
    if out.classes == "choices":
        return torch.randint(0, shape[0], (1,), generator=g), shape[0]
    n = TINY["vocab_size"] if out.classes == "vocab" else cfg["num_labels"]
    return torch.randint(0, n, shape if out.per_token else shape[:1], generator=g), n


def run_tiny(cls: type[Component], family: str) -> None:
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = archzoo.build_model(tiny_spec(cls, family))
    model.train()
    head_name = model.spec.data["head"]["kind"]
    if head_name not in HEAD_OUTPUTS:
        pytest.fail(
            f"the registry sweep does not know the outputs of head {head_name!r}; "
            "add it to HEAD_OUTPUTS in tests/test_registry_sweep.py"
        )
    src = torch.randint(0, TINY["vocab_size"], (BATCH, SRC_LEN), generator=g)
    src_mask = torch.ones(BATCH, SRC_LEN, dtype=torch.long)
    src_mask[-1, SRC_LEN // 2 :] = 0  # right padding in the last row
    kwargs: dict = {"input_ids": src, "attention_mask": src_mask}
    T = SRC_LEN
    if family == "encoder-decoder":
        T = TGT_LEN
        kwargs["decoder_input_ids"] = torch.randint(0, TINY["vocab_size"], (BATCH, T), generator=g)
        kwargs["decoder_attention_mask"] = torch.ones(BATCH, T, dtype=torch.long)

    expected = HEAD_OUTPUTS[head_name]
    n_classes = None
    if expected is not None:
        labels, n_classes = make_labels(head_name, model.spec.data["head"], (BATCH, T), g)
        per_class = expected.classes not in ("positions", "binary")  # binary: padding skipped
        if expected.per_token and per_class and family != "encoder-decoder":
            labels = labels.masked_fill(src_mask == 0, -100)  # no targets on padding
        kwargs["labels"] = labels
    if expected is not None and expected.classes == "choices":  # one example, BATCH choices
        kwargs.update(input_ids=src[None], attention_mask=src_mask[None])
    out = model(**kwargs)

    assert out.last_hidden_state.shape == (BATCH, T, TINY["d_model"])
    assert torch.isfinite(out.last_hidden_state).all(), "non-finite hidden states"
    if family == "encoder-decoder":
        assert out.encoder_last_hidden_state.shape == (BATCH, SRC_LEN, TINY["d_model"])
    if expected is None:
        assert out.logits is None
        # A plain sum through a final LayerNorm has zero gradient by construction
        # (normalised features sum to a constant), so project onto fixed random weights.
        w = torch.randn(TINY["d_model"], generator=g)
        loss = (out.last_hidden_state * w).sum()
    else:
        shape = (BATCH, T, n_classes) if expected.per_token else (BATCH, n_classes)
        if expected.classes == "choices":
            shape = (1, BATCH)
        if expected.classes == "binary":
            shape = (BATCH, T)
        logits = out.logits
        if expected.classes == "positions":  # a span: one logit per token for start and end
            shape, logits = (BATCH, T), torch.cat([out.start_logits, out.end_logits])
            assert out.start_logits.shape == out.end_logits.shape == shape
        else:
            assert logits.shape == shape
        assert torch.isfinite(logits).all(), "non-finite logits"
        loss = out.loss
        assert loss.shape == ()
        # At init the logits are near-uniform, so cross-entropy is close to ln(classes).
        assert abs(loss.item() - math.log(n_classes)) < 1.0, (
            f"initial loss {loss.item():.3f} is far from ln({n_classes}) = "
            f"{math.log(n_classes):.3f}"
        )
    assert torch.isfinite(loss), "non-finite loss"
    loss.backward()
    missing = [n for n, p in model.named_parameters() if p.requires_grad and p.grad is None]
    assert not missing, f"parameters without a gradient: {missing}"
    bad = [
        n for n, p in model.named_parameters() if p.grad is not None and not p.grad.isfinite().all()
    ]
    assert not bad, f"parameters with non-finite gradients: {bad}"


@pytest.mark.parametrize("name", archzoo.list_models())
def test_zoo_spec_builds_on_meta(name: str) -> None:
    model = archzoo.build_model(name, device="meta")
    spec = archzoo.load_spec(name)
    assert model.spec == spec and model.family == spec.family
    assert all(p.device.type == "meta" for p in model.parameters())
    summary = model.summary()
    assert summary["params"] == model.num_parameters() == sum(summary["parts"].values()) > 0


@pytest.mark.parametrize("component", component_ids())
def test_component_trains_in_a_tiny_model(component: str) -> None:
    kind, name = component.split(":", 1)
    cls = archzoo.get_registry().get(kind, name)
    for family in families_for(cls):
        run_tiny(cls, family)


def test_sweep_knows_every_registered_kind() -> None:
    """Every kind in the registry has a place in the sweep (checked before any model runs)."""
    kinds = {c.kind for c in archzoo.list_components()}
    assert kinds <= set(STACK_KINDS) | {"head"}, (
        f"kinds the sweep cannot place: {sorted(kinds - set(STACK_KINDS) - {'head'})}"
    )
