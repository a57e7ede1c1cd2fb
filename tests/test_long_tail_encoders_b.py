"""Issue 33's encoders that needed a new option: SqueezeBERT (block-diagonal projections, the
`*_groups` options of the attention's projections and of the MLP) and X-MOD (post_ln's
language adapters, read through the `lang_ids` input, per row or per token). Each from a tiny perturbed
transformers model with a padded row: every task class transformers has gives its outputs
within 1e-4 and its loss within 1e-5. (The export round trip is tests/test_export.py's sweep
of every registered type; the zoo spec's count is tests/test_zoo_counts.py's.)"""

from __future__ import annotations

import pytest
import torch
import transformers as hf
from hf_util import V, perturb
from test_encoders import HEAD_KINDS, check_parity, labels_for, task_config

import archzoo
from archzoo.errors import SpecError
from archzoo.hf.probe import model_class
from archzoo.parts.converter import ConversionError
from archzoo.parts.linear import GroupedLinear
from archzoo.parts.registry import get_registry

LAYERS = dict(
    vocab_size=V,
    num_hidden_layers=2,
    hidden_size=32,
    num_attention_heads=4,
    intermediate_size=64,
    max_position_embeddings=64,
)
# model type -> (tiny config, its pad id, whether it has token types)
ENCODERS: dict[str, tuple[dict, int, bool]] = {
    # groups unlike each other (q 4, k 2, v 8, post-attention 2, intermediate 4, output 8)
    "squeezebert": (
        dict(
            LAYERS,
            embedding_size=32,
            q_groups=4,
            k_groups=2,
            v_groups=8,
            post_attention_groups=2,
            intermediate_groups=4,
            output_groups=8,
            pad_token_id=0,
        ),
        0,
        True,
    ),
    # three languages, the second's adapters read per row; a quarter-width bottleneck
    "xmod": (
        dict(
            LAYERS,
            languages=["en_XX", "de_DE", "fr_XX"],
            default_language="en_XX",
            adapter_reduction_factor=4,
            pad_token_id=1,
        ),
        1,
        True,
    ),
}
ALL_TASKS = (
    "Model",
    "ForMaskedLM",
    "ForSequenceClassification",
    "ForTokenClassification",
    "ForQuestionAnswering",
    "ForMultipleChoice",
)
ENCODER_TASKS = {"squeezebert": ALL_TASKS, "xmod": ALL_TASKS}
# X-MOD's adapter settings that differ from the defaults (a norm of their own, the residual
# from the unnormed sum, no norm at all), each on the headless model
XMOD_VARIANTS = [
    {"adapter_layer_norm": True},
    {"ln_before_adapter": False},
    {"adapter_reuse_layer_norm": False},
    {"adapter_layer_norm": True, "ln_before_adapter": False},
]
ENCODER_CASES = [(t, task) for t, tasks in ENCODER_TASKS.items() for task in tasks]


def tiny_encoder(model_type: str, task: str, **over) -> torch.nn.Module:
    config = hf.AutoConfig.for_model(model_type, **{**ENCODERS[model_type][0], **over})
    torch.manual_seed(0)
    model = model_class(get_registry().converter(model_type), task, config, None)(config)
    perturb(model)
    return model.eval()


def encoder_inputs(model_type: str, shape: tuple[int, ...]) -> dict[str, torch.Tensor]:
    """Random ids, right padding after 5 tokens in the last row (of the last example),
    random token types where the type has them."""
    _, pad, token_types = ENCODERS[model_type]
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(3, V, shape, generator=g)
    mask = torch.ones(shape, dtype=torch.long)
    mask[(-1,) * (len(shape) - 1)][5:] = 0
    out = {"input_ids": ids.masked_fill(mask == 0, pad), "attention_mask": mask}
    if token_types:
        out["token_type_ids"] = torch.randint(0, 2, shape, generator=g)
    if model_type == "xmod" and len(shape) == 2:  # a language per row (multiple choice:
        out["lang_ids"] = torch.tensor([1, 2])  # the default; transformers repeats them)
    return out


@pytest.mark.parametrize(("model_type", "task"), ENCODER_CASES)
def test_encoder_task_matches_transformers_outputs_and_loss(tmp_path, model_type, task):
    problem = "single" if task == "ForSequenceClassification" else ""
    model = tiny_encoder(model_type, task, **task_config(task, problem, {}))
    shape = (2, 3, 9) if task == "ForMultipleChoice" else (2, 9)  # (B, C, T) or (B, T)
    feed = encoder_inputs(model_type, shape)
    labels = labels_for(task, problem, shape, feed["attention_mask"])
    ours_labels = labels.get("labels")
    if "start_positions" in labels:
        ours_labels = torch.stack([labels["start_positions"], labels["end_positions"]], -1)
    pooler = model_type == "squeezebert" and task not in (
        "Model",
        "ForSequenceClassification",
        "ForMultipleChoice",
    )
    unused = 32 * 32 + 32 if pooler else 0  # every class holds the pooler: unread here
    ours = check_parity(tmp_path, model, feed, labels, ours_labels, unused=unused)
    assert ours.spec.data["head"]["kind"] == HEAD_KINDS[task]
    assert ours.hf_source["model_type"] == model_type


@pytest.mark.parametrize("groups", [1, 2, 4])
def test_grouped_linear_equals_torch_grouped_conv1d(groups):
    """GroupedLinear on (B, T, C) equals torch's Conv1d(kernel 1, groups) on (B, C, T) with
    the same weight (the conv's without its kernel dimension) and bias."""
    torch.manual_seed(0)
    conv = torch.nn.Conv1d(8, 12, kernel_size=1, groups=groups)
    lin = GroupedLinear(8, 12, groups=groups, bias=True)
    with torch.no_grad():
        lin.weight.copy_(conv.weight.squeeze(-1))  # (12, 8 / groups)
        lin.bias.copy_(conv.bias)
    x = torch.randn(2, 5, 8)
    ref = conv(x.transpose(1, 2)).transpose(1, 2)  # (B, T, 12)
    assert (lin(x) - ref).abs().max().item() <= 1e-6
    assert lin.weight.numel() == conv.weight.numel()


def test_grouped_linear_is_block_diagonal():
    """Each group of outputs depends on its own group of inputs only: the dense matrix of
    the map is zero off its diagonal blocks."""
    torch.manual_seed(0)
    lin = GroupedLinear(6, 9, groups=3, bias=False)
    dense = lin(torch.eye(6)).T  # (9, 6): column j is the map of input j
    for a in range(3):
        for b in range(3):
            block = dense[3 * a : 3 * a + 3, 2 * b : 2 * b + 2]
            assert torch.equal(block, lin.weight[3 * a : 3 * a + 3]) if a == b else not block.any()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"attention.q_groups": 2}, "needs separate q, k and v projections"),
        ({"attention.fused_qkv": False, "attention.k_groups": 3}, "3 groups do not divide"),
        ({"ffn.out_groups": 5}, "5 groups do not divide d_model 32 and d_ff 64"),
    ],
)
def test_groups_that_cannot_be_built_are_refused_by_name(overrides, message):
    sizes = dict(vocab_size=V, d_model=32, n_layers=1, n_heads=4, d_ff=64)
    with pytest.raises(SpecError, match=message):
        archzoo.build_model("bert-base", {**sizes, **overrides}, device="meta")


def test_squeezebert_with_a_narrower_embedding_is_refused():
    conv = get_registry().converter("squeezebert")
    config = hf.AutoConfig.for_model("squeezebert").to_dict()
    with pytest.raises(ConversionError, match="embedding_size=128 differs from hidden_size"):
        conv.to_spec({**config, "embedding_size": 128})


@pytest.mark.parametrize("variant", XMOD_VARIANTS)
def test_xmod_adapter_settings_match_transformers(tmp_path, variant):
    model = tiny_encoder("xmod", "Model", **variant)
    feed = encoder_inputs("xmod", (2, 9))
    check_parity(tmp_path, model, feed, {}, None)


def test_xmod_language_per_token_matches_transformers(tmp_path):
    """lang_ids (B, T): each token through its own language's adapter."""
    model = tiny_encoder("xmod", "ForMaskedLM")
    feed = encoder_inputs("xmod", (2, 9))
    feed["lang_ids"] = torch.randint(0, 3, (2, 9), generator=torch.Generator().manual_seed(5))
    check_parity(tmp_path, model, feed, {}, None)


def test_language_adapters_are_each_languages_own_mlp():
    """A row through the adapters equals its language's two linear maps and activation
    computed by hand; a row of another language does not use them."""
    sizes = dict(vocab_size=V, d_model=16, n_layers=1, n_heads=2, d_ff=32)
    block = {"kind": "post_ln", "languages": ["a", "b"], "adapter_dim": 4}
    model = archzoo.build_model("bert-base", {**sizes, "block": block})
    adapters = model.encoder.blocks[0].adapters
    x = torch.randn(2, 3, 16)
    out = adapters(x, torch.tensor([1, 0]))
    for row, lang in ((0, 1), (1, 0)):
        w1, b1 = adapters.fc_in.weight[lang], adapters.fc_in.bias[lang]
        w2, b2 = adapters.fc_out.weight[lang], adapters.fc_out.bias[lang]
        ref = torch.nn.functional.gelu(x[row] @ w1.T + b1) @ w2.T + b2
        assert (out[row] - ref).abs().max().item() <= 1e-6


def test_language_adapters_without_lang_ids_or_default_are_refused():
    sizes = dict(vocab_size=V, d_model=16, n_layers=1, n_heads=2, d_ff=32)
    block = {"kind": "post_ln", "languages": ["a", "b"]}
    model = archzoo.build_model("bert-base", {**sizes, "block": block})
    ids = torch.randint(0, V, (2, 4))
    with pytest.raises(ValueError, match="need lang_ids"):
        model(ids)
    with pytest.raises(ValueError, match=r"lang_ids must lie in \[0, 2\)"):
        model(ids, lang_ids=torch.tensor([0, 2]))
