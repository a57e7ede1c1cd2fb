"""ConvBERT (issue 33): the `span_conv` attention (self-attention heads beside span-based
dynamic convolution heads) and the grouped FFN's saved blocks, each against a reference
computed here by loops; then every transformers task class from a tiny perturbed model with
a padded row (outputs within 1e-4, loss within 1e-5), the export of a grouped model with
E == d_model into transformers, and the refusals by name. (The export sweep of every type is
tests/test_export.py's; the zoo spec's count tests/test_zoo_counts.py's.)"""

from __future__ import annotations

import math

import pytest
import torch
import transformers as hf
from hf_util import V, perturb, save_hf
from test_encoders import HEAD_KINDS, check_parity, labels_for, task_config

import archzoo
from archzoo.errors import SpecError
from archzoo.hf.probe import model_class
from archzoo.parts.converter import ConversionError
from archzoo.parts.hf_transforms import GroupBlocks
from archzoo.parts.linear import GroupedLinear
from archzoo.parts.registry import get_registry

# 2 self-attention + 2 convolution heads of 8, 3-token kernels, a 16-wide embedding, FFN in 2
CONFIG = dict(
    vocab_size=V,
    num_hidden_layers=2,
    hidden_size=32,
    num_attention_heads=4,
    intermediate_size=64,
    max_position_embeddings=64,
    embedding_size=16,
    head_ratio=2,
    conv_kernel_size=3,
    num_groups=2,
    pad_token_id=0,
)
TASKS = (
    "Model",
    "ForMaskedLM",
    "ForSequenceClassification",
    "ForTokenClassification",
    "ForQuestionAnswering",
    "ForMultipleChoice",
)
# settings unlike the above: one self-attention head (4 // 4), fewer than one (4 // 8: one,
# as transformers rounds), E == d_model with ungrouped FFN, a wider kernel
VARIANTS = [
    {"head_ratio": 4},
    {"head_ratio": 8, "conv_kernel_size": 5},
    {"embedding_size": 32, "num_groups": 1},
    {"conv_kernel_size": 7, "num_groups": 4},
]


def tiny(task: str, **over) -> torch.nn.Module:
    config = hf.AutoConfig.for_model("convbert", **{**CONFIG, **over})
    torch.manual_seed(0)
    model = model_class(get_registry().converter("convbert"), task, config, None)(config)
    perturb(model)
    return model.eval()


def inputs(shape: tuple[int, ...]) -> dict[str, torch.Tensor]:
    """Random ids and token types, right padding after 5 tokens in the last row."""
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(3, V, shape, generator=g)
    mask = torch.ones(shape, dtype=torch.long)
    mask[(-1,) * (len(shape) - 1)][5:] = 0
    types = torch.randint(0, 2, shape, generator=g)
    return {
        "input_ids": ids.masked_fill(mask == 0, 0),
        "attention_mask": mask,
        "token_type_ids": types,
    }


@pytest.mark.parametrize("task", TASKS)
def test_convbert_task_matches_transformers_outputs_and_loss(tmp_path, task):
    problem = "single" if task == "ForSequenceClassification" else ""
    model = tiny(task, **task_config(task, problem, {}))
    shape = (2, 3, 9) if task == "ForMultipleChoice" else (2, 9)  # (B, C, T) or (B, T)
    feed = inputs(shape)
    labels = labels_for(task, problem, shape, feed["attention_mask"])
    ours_labels = labels.get("labels")
    if "start_positions" in labels:
        ours_labels = torch.stack([labels["start_positions"], labels["end_positions"]], -1)
    ours = check_parity(tmp_path, model, feed, labels, ours_labels)
    assert ours.spec.data["head"]["kind"] == HEAD_KINDS[task]
    assert ours.spec.data["attention"]["kind"] == "span_conv"
    assert ours.spec.data["embedding"]["kind"] == "factorized"


@pytest.mark.parametrize("variant", VARIANTS)
def test_convbert_settings_match_transformers(tmp_path, variant):
    model = tiny("ForMaskedLM", **variant)
    check_parity(tmp_path, model, inputs((2, 9)), {}, None)


def span_conv_reference(layer, x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """The mixed attention of x (B, T, d) by loops: per head softmax attention over the
    kept keys; per convolution head a softmax kernel over K taps from q * (separable
    convolution of x), weighing the value projection's taps (zeros beyond the ends)."""
    B, T, d = x.shape
    H, hd, K = layer.heads, layer.head_size, layer.cfg.conv_kernel_size

    def lin(m, t):
        return t @ m.weight.T + m.bias

    q, k, v, u = lin(layer.q, x), lin(layer.k, x), lin(layer.v, x), lin(layer.conv_value, x)
    taps = layer.key_depthwise.weight[:, 0]  # (d, K)
    dw = torch.zeros_like(x)
    for t in range(T):
        for j in range(K):
            s = t - K // 2 + j
            if 0 <= s < T:
                dw[:, t] += taps[:, j] * x[:, s]
    kernel = lin(layer.conv_kernel, q * lin(layer.key_pointwise, dw)).view(B, T, H, K)
    kernel = kernel.softmax(-1)
    attn, conv = torch.zeros(B, T, H, hd), torch.zeros(B, T, H, hd)
    for h in range(H):
        cols = slice(h * hd, (h + 1) * hd)
        scores = q[..., cols] @ k[..., cols].transpose(1, 2) / math.sqrt(hd)  # (B, T, T)
        scores = scores.masked_fill(~keep[:, None, :], float("-inf"))
        attn[:, :, h] = scores.softmax(-1) @ v[..., cols]
        for t in range(T):
            for j in range(K):
                s = t - K // 2 + j
                if 0 <= s < T:
                    conv[:, t, h] += kernel[:, t, h, j, None] * u[:, s, cols]
    mixed = torch.cat([attn.reshape(B, T, -1), conv.reshape(B, T, -1)], dim=-1)
    return lin(layer.out, mixed)


@pytest.mark.parametrize(("head_ratio", "kernel"), [(2, 3), (4, 5), (1, 1)])
def test_span_conv_equals_its_loop_reference(head_ratio, kernel):
    sizes = dict(vocab_size=V, d_model=32, n_layers=1, n_heads=4, d_ff=64)
    attention = {"kind": "span_conv", "head_ratio": head_ratio, "conv_kernel_size": kernel}
    torch.manual_seed(0)
    model = archzoo.build_model("convbert-base", {**sizes, "attention": attention}).eval()
    perturb(model)
    layer = model.encoder.blocks[0].attention
    seen = {}
    layer.register_forward_hook(lambda m, args, out: seen.update(x=args[0], out=out))
    ids, mask = torch.randint(3, V, (2, 7)), torch.ones(2, 7, dtype=torch.long)
    mask[1, 4:] = 0
    with torch.no_grad():
        model(ids, attention_mask=mask)
        ref = span_conv_reference(layer, seen["x"], mask.bool())
    assert layer.heads == max(4 // head_ratio, 1) and layer.head_size == 16 // layer.heads
    assert (seen["out"] - ref).abs().max().item() <= 1e-5


@pytest.mark.parametrize("groups", [1, 2, 4])
def test_group_blocks_give_each_groups_own_matmul(groups):
    """GroupedLinear with a weight read from (G, in / G, out / G) blocks equals x_g @ W[g]
    per group, concatenated; the inverse gives the blocks back."""
    torch.manual_seed(0)
    blocks, bias = torch.randn(groups, 8 // groups, 12 // groups), torch.randn(12)
    lin = GroupedLinear(8, 12, groups=groups, bias=True)
    ctx = {"ffn": {"in_groups": groups}}
    (weight,) = GroupBlocks("ffn.in_groups").forward([blocks], ctx)
    with torch.no_grad():
        lin.weight.copy_(weight)
        lin.bias.copy_(bias)
    x = torch.randn(3, 8)
    xg = x.view(3, groups, -1)
    ref = torch.cat([xg[:, g] @ blocks[g] for g in range(groups)], dim=-1) + bias
    assert (lin(x) - ref).abs().max().item() <= 1e-6
    (back,) = GroupBlocks("ffn.in_groups").inverse([weight], ctx)
    assert torch.equal(back, blocks if groups > 1 else weight)


def test_grouped_convbert_exports_into_transformers(tmp_path):
    """E == d_model, the FFN in 2 groups: to_hf writes the blocks transformers loads."""
    ref = tiny("ForMaskedLM", embedding_size=32)
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "hf"))
    report = archzoo.to_hf(ours, tmp_path / "out")
    assert (report["model_type"], report["architecture"]) == ("convbert", "ConvBertForMaskedLM")
    back, info = hf.ConvBertForMaskedLM.from_pretrained(tmp_path / "out", output_loading_info=True)
    assert not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys"))
    assert back.config.num_groups == 2 and back.config.embedding_size == 32
    feed = inputs((2, 9))
    with torch.no_grad():
        diff = (ref(**feed).logits - back.eval()(**feed).logits).abs().max().item()
    assert diff <= 1e-6


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"d_model": 30, "n_heads": 6, "attention.head_ratio": 3},
            "2 self-attention heads .* do not split d_model 30",
        ),
        ({"attention.conv_kernel_size": 4}, "4 taps have no centre token"),
    ],
)
def test_span_conv_that_cannot_be_built_is_refused_by_name(overrides, message):
    sizes = dict(vocab_size=V, d_model=32, n_layers=1, n_heads=4, d_ff=64)
    with pytest.raises(SpecError, match=message):
        archzoo.build_model("convbert-base", {**sizes, **overrides}, device="meta")


def test_span_conv_in_a_causal_decoder_is_refused():
    sizes = dict(vocab_size=V, d_model=32, n_layers=1, n_heads=4, d_ff=64)
    with pytest.raises(SpecError, match="span_conv"):
        archzoo.build_model(
            "gpt2", {**sizes, "attention": {"kind": "span_conv"}, "position": "learned"}
        )


def test_convbert_with_a_summary_projection_is_refused():
    conv = get_registry().converter("convbert")
    config = hf.AutoConfig.for_model("convbert").to_dict()
    config = {**config, "architectures": ["ConvBertForMultipleChoice"], "summary_use_proj": True}
    with pytest.raises(ConversionError, match="ConvBERT's summary is"):
        conv.to_spec(config)


def test_electra_with_embedding_size_equal_d_model_exports_as_electra(tmp_path):
    """ConvBERT's parent table: an E == d_model ELECTRA writes embedding_size = d_model (not
    ElectraConfig's 128), so it exports as itself, not as the BERT it also fits."""
    config = hf.ElectraConfig(
        vocab_size=V,
        embedding_size=32,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=4,
        intermediate_size=64,
    )
    torch.manual_seed(0)
    ref = hf.ElectraForMaskedLM(config)
    perturb(ref)
    ours = archzoo.from_hf(save_hf(ref.eval(), tmp_path / "hf"))
    report = archzoo.to_hf(ours, tmp_path / "out")
    assert (report["model_type"], report["architecture"]) == ("electra", "ElectraForMaskedLM")
    back = hf.ElectraForMaskedLM.from_pretrained(tmp_path / "out").eval()
    feed = inputs((2, 9))
    with torch.no_grad():
        assert (ref(**feed).logits - back(**feed).logits).abs().max().item() <= 1e-6
