"""The encoder branch against transformers: every type's base model and task heads (MLM,
ELECTRA's discriminator, sequence / token classification, QA, multiple choice) import with
HF's outputs and losses; tiny random models, every parameter perturbed, a right-padded row."""

from __future__ import annotations

import pytest
import torch
import transformers as hf
from hf_util import V, max_diff_unpadded, perturb, save_hf

import archzoo

LAYERS = dict(num_hidden_layers=2, hidden_size=32, num_attention_heads=4, intermediate_size=64)
# model type -> (HF class prefix, tiny config, the type's pad id, whether it has token types)
TYPES: dict[str, tuple[str, dict, int, bool]] = {
    "bert": ("Bert", LAYERS, 0, True),
    "roberta": ("Roberta", dict(LAYERS, type_vocab_size=1), 1, False),
    "albert": ("Albert", dict(LAYERS, embedding_size=16), 0, True),
}
# model type -> the HF architectures (class suffixes) it has, beyond multiple choice
TASKS: dict[str, tuple[str, ...]] = {}
MULTIPLE_CHOICE = ("bert", "roberta", "albert")
PROBLEMS = {
    "single": dict(num_labels=3),
    "regression": dict(num_labels=1),
    "multi": dict(num_labels=3, problem_type="multi_label_classification"),
}


def tiny(model_type: str, suffix: str, **overrides) -> torch.nn.Module:
    """A perturbed tiny HF model of class `<Prefix><suffix>`."""
    prefix, sizes, pad, _ = TYPES[model_type]
    config_cls = getattr(hf, prefix + "Config")
    config = config_cls(
        **{
            "vocab_size": V,
            "pad_token_id": pad,
            "max_position_embeddings": 64,
            **sizes,
            **overrides,
        }
    )
    model = getattr(hf, prefix + suffix)(config)
    perturb(model)
    return model.eval()


def inputs(model_type: str, shape: tuple[int, ...]) -> dict[str, torch.Tensor]:
    """Random ids with the type's pad id after 5 tokens in the last row (of the last example),
    and random token types where the type has them."""
    _, _, pad, token_types = TYPES[model_type]
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(3, V, shape, generator=g)
    mask = torch.ones(shape, dtype=torch.long)
    mask[(-1,) * (len(shape) - 1)][5:] = 0
    out = {"input_ids": ids.masked_fill(mask == 0, pad), "attention_mask": mask}
    if token_types:
        out["token_type_ids"] = torch.randint(0, 2, shape, generator=g)
    return out


def import_and_reload(tmp_path, model):
    """from_hf, then save and load: the same spec and bit-identical tensors."""
    ours = archzoo.from_hf(save_hf(model, tmp_path / "hf"))
    archzoo.save(ours, tmp_path / "m.safetensors")
    again = archzoo.load(tmp_path / "m.safetensors")
    assert again.spec == ours.spec
    a, b = ours.state_dict(), again.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    return ours, again


def check_parity(tmp_path, model, feed: dict, labels: dict, ours_labels: torch.Tensor | None):
    """HF's outputs and loss against the imported model's and the reloaded one's."""
    ours, again = import_and_reload(tmp_path, model)
    assert ours.num_parameters() == sum(p.numel() for p in model.parameters())
    with torch.no_grad():
        ref = model(**feed, **labels)
        extra = {} if ours_labels is None else {"labels": ours_labels}
        got = ours(**feed, **extra)
        reloaded = again(**feed, **extra)
    mask = feed["attention_mask"]
    for name in ("last_hidden_state", "logits", "start_logits", "end_logits"):
        r = getattr(ref, name, None)
        if r is None or (name == "last_hidden_state" and "logits" in ref):
            continue
        g = getattr(got, name)
        if r.shape[:2] == mask.shape and r.dim() >= 2:  # per token: real positions only
            diff = max_diff_unpadded(r.reshape(*mask.shape, -1), g.reshape(*mask.shape, -1), mask)
        else:
            diff = (r - g).abs().max().item()
        assert diff <= 1e-4, f"{name}: max |diff| {diff}"
        assert (g - getattr(reloaded, name)).abs().max().item() <= 1e-6
    if labels:
        assert abs(ref.loss.item() - got.loss.item()) <= 1e-5
    return ours


@pytest.mark.parametrize("model_type", MULTIPLE_CHOICE)
def test_multiple_choice_matches_hf_logits_and_loss(tmp_path, model_type):
    model = tiny(model_type, "ForMultipleChoice")
    feed = inputs(model_type, (2, 3, 9))  # (B, C, T)
    labels = torch.tensor([2, 0])
    ours = check_parity(tmp_path, model, feed, {"labels": labels}, labels)
    assert ours.spec.data["head"]["kind"] == "multiple_choice"
    with torch.no_grad():
        assert ours(**feed).logits.shape == (2, 3)


def test_multiple_choice_refuses_flat_input_ids(tmp_path):
    ours = archzoo.from_hf(save_hf(tiny("bert", "ForMultipleChoice"), tmp_path / "hf"))
    with pytest.raises(ValueError, match=r"multiple_choice.*\(batch, choices, seq\), got \(2, 9\)"):
        ours(torch.ones(2, 9, dtype=torch.long))
    with pytest.raises(ValueError, match=r"attention_mask of shape \(2, 9\) does not match"):
        ours(torch.ones(2, 3, 9, dtype=torch.long), attention_mask=torch.ones(2, 9))
