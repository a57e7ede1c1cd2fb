"""Longformer against transformers: the base model and every task head import with HF's
outputs and losses, with global attention given per batch (`global_attention_mask`) and with
the global tokens HF's task models set by themselves; windows differ per layer, the length is
no multiple of them (HF pads), tiny random models with every parameter perturbed, a
right-padded row."""

from __future__ import annotations

import pytest
import torch
import transformers as hf
from hf_util import V, perturb, save_hf
from test_encoders import LAYERS, PROBLEMS, task_config, task_parity, zoo_import

import archzoo

SEP, PAD = 2, 1  # the separator and the pad id (on padding, numbered as HF does)
WINDOWS = [4, 6]  # one-sided 2 and 3: both far below the length
LENGTH, REAL = 21, 13  # the last row (of the last example) is padded after REAL tokens
TASKS = (
    "Model",
    "ForMaskedLM",
    "ForSequenceClassification",
    "ForTokenClassification",
    "ForQuestionAnswering",
    "ForMultipleChoice",
)
CASES = [
    (suffix, problem, given)
    for suffix in TASKS
    for problem in (tuple(PROBLEMS) if suffix == "ForSequenceClassification" else ("",))
    for given in (True, False)
]


def tiny(suffix: str, **overrides) -> torch.nn.Module:
    """A perturbed tiny `Longformer<suffix>` with a different window in each layer."""
    sizes = dict(LAYERS, vocab_size=V, max_position_embeddings=66, type_vocab_size=1)
    ids = dict(pad_token_id=PAD, sep_token_id=SEP)
    config = hf.LongformerConfig(**sizes, **ids, attention_window=WINDOWS, **overrides)
    model = getattr(hf, "Longformer" + suffix)(config)
    perturb(model)
    return model.eval()


def shape_of(suffix: str) -> tuple[int, ...]:
    """(B, C, T) for multiple choice, else (B, T)."""
    return (2, 3, LENGTH) if suffix == "ForMultipleChoice" else (2, LENGTH)


def inputs(shape: tuple[int, ...], given: bool) -> dict[str, torch.Tensor]:
    """`<s> q q q </s> </s> c ... </s>` rows (HF's QA / multiple-choice layout), the last one
    padded, and (given) global tokens on some positions, one of them on padding."""
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(3, V, shape, generator=g)
    mask = torch.ones(shape, dtype=torch.long)
    last = (-1,) * (len(shape) - 1)
    mask[last][REAL:] = 0
    ids[..., 0], ids[..., 4], ids[..., 5], ids[..., -1] = 0, SEP, SEP, SEP
    ids[last][REAL - 1] = SEP
    feed = {"input_ids": ids.masked_fill(mask == 0, PAD), "attention_mask": mask}
    if given:
        glob = torch.zeros(shape, dtype=torch.long)
        glob[..., 9] = 1
        glob[(0,) * (len(shape) - 1)][2] = 1
        glob[last][[0, 17]] = 1  # 17: padding, which is never global
        feed["global_attention_mask"] = glob
    return feed


@pytest.mark.parametrize(("suffix", "problem", "given"), CASES)
def test_task_matches_hf_outputs_and_loss(tmp_path, suffix, problem, given):
    model = tiny(suffix, **task_config(suffix, problem))
    ours = task_parity(tmp_path, model, suffix, problem, inputs(shape_of(suffix), given))
    spec = ours.spec.data
    assert (spec["attention"]["window"], spec["layers"][0]["attention"]["window"]) == (4, 6)


DEFAULTS = {  # task -> HF's global tokens when given none, for the rows inputs() builds
    "ForSequenceClassification": [0],
    "ForQuestionAnswering": [0, 1, 2, 3],
    "ForMultipleChoice": list(range(6, LENGTH)),
}


@pytest.mark.parametrize("suffix", sorted(DEFAULTS))
def test_default_global_tokens_are_hfs(tmp_path, suffix):
    """Without a global mask the task's default one applies: the same outputs as passing
    HF's default mask explicitly, and not those of no global token at all."""
    ours = archzoo.from_hf(save_hf(tiny(suffix), tmp_path / "hf"))
    shape = shape_of(suffix)
    feed = inputs(shape, given=False)
    explicit = torch.zeros(shape, dtype=torch.long)
    explicit[..., DEFAULTS[suffix]] = 1
    name = "start_logits" if suffix == "ForQuestionAnswering" else "logits"
    with torch.no_grad():
        default = getattr(ours(**feed), name)
        same = getattr(ours(**feed, global_attention_mask=explicit), name)
        none = getattr(ours(**feed, global_attention_mask=torch.zeros_like(explicit)), name)
    keep = slice(None) if suffix != "ForQuestionAnswering" else feed["attention_mask"].bool()
    assert (default - same)[keep].abs().max().item() <= 1e-6
    assert (default - none)[keep].abs().max().item() > 1e-3


def test_global_inputs_are_checked(tmp_path):
    ours = archzoo.from_hf(save_hf(tiny("ForQuestionAnswering"), tmp_path / "hf"))
    feed = inputs((2, LENGTH), given=False)
    with pytest.raises(ValueError, match=r"global_attention_mask must be \(2, 21\).*\(2, 20\)"):
        ours(**feed, global_attention_mask=torch.zeros(2, LENGTH - 1))
    with pytest.raises(TypeError, match=r"global_attension_mask; .* read: global_attention_mask"):
        ours(**feed, global_attension_mask=torch.zeros(2, LENGTH))
    no_sep = feed["input_ids"].masked_fill(feed["input_ids"] == SEP, 7)
    with pytest.raises(ValueError, match=r"separator id 2 .*or pass global_attention_mask"):
        ours(no_sep, attention_mask=feed["attention_mask"])


def test_zoo_import_saves_the_model_hf_computes(tmp_path):
    model = tiny("ForMaskedLM")
    out = zoo_import(tmp_path, model)
    feed = inputs((2, LENGTH), given=True)
    mask = feed["attention_mask"].bool()
    with torch.no_grad():
        want, got = model(**feed).logits, archzoo.load(out)(**feed).logits
    assert (want - got)[mask].abs().max().item() <= 1e-4
