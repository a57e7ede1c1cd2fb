"""MobileBERT (issue 33): its mechanisms, each against an independent reference, and every
task class transformers has within 1e-4 of transformers on a tiny perturbed model with a
padded row. The mechanisms: the `affine` norm (NoNorm), the `factorized` embedding's
`project: tokens` with `trigram`, the `bottleneck` block (input / q-k / output bottlenecks,
stacked FFNs, values from the full-width input through mha's `value_width`), and the `mlm`
head's `transform_norm_eps` and `decoder_extension`. (The export round trip is
tests/test_export.py's sweep of every registered type; the zoo spec's count is
tests/test_zoo_counts.py's.)"""

from __future__ import annotations

import pytest
import torch
import transformers as hf
from hf_util import V, perturb
from test_encoders import check_parity, labels_for, task_config

import archzoo
from archzoo.errors import SpecError
from archzoo.hf.probe import model_class
from archzoo.parts.converter import ConversionError
from archzoo.parts.interfaces import AttentionContext
from archzoo.parts.masks import AttentionMask
from archzoo.parts.registry import get_registry

# hidden 32, bottleneck 16 (4 heads of 4), table 8 wide, three FFNs per layer
TINY = dict(
    vocab_size=V,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=24,
    max_position_embeddings=64,
    embedding_size=8,
    intra_bottleneck_size=16,
    num_feedforward_networks=3,
)
TASKS = {  # transformers' class suffix -> archzoo head kind
    "Model": "none",
    "ForMaskedLM": "mlm",
    "ForSequenceClassification": "classifier",
    "ForTokenClassification": "token_classifier",
    "ForQuestionAnswering": "question_answering",
    "ForMultipleChoice": "multiple_choice",
}
# the switches transformers has besides the defaults, each on the headless model
VARIANTS = [
    {"use_bottleneck_attention": True},  # q, k and v from the input bottleneck
    {"use_bottleneck": False},  # no bottleneck: every sublayer at hidden_size
    {"normalization_type": "layer_norm", "layer_norm_eps": 1e-5},
    {"trigram_input": False},  # the table alone, projected
    {"num_feedforward_networks": 1, "hidden_act": "gelu"},
]


def tiny(task: str, **over) -> torch.nn.Module:
    config = hf.MobileBertConfig(**{**TINY, **over})
    torch.manual_seed(0)
    model = model_class(get_registry().converter("mobilebert"), task, config, None)(config)
    perturb(model)
    return model.eval()


def inputs(shape: tuple[int, ...]) -> dict[str, torch.Tensor]:
    """Random ids and token types, right padding after 5 tokens in the last row."""
    g = torch.Generator().manual_seed(1)
    mask = torch.ones(shape, dtype=torch.long)
    mask[(-1,) * (len(shape) - 1)][5:] = 0
    ids = torch.randint(3, V, shape, generator=g).masked_fill(mask == 0, 0)
    return {
        "input_ids": ids,
        "attention_mask": mask,
        "token_type_ids": torch.randint(0, 2, shape, generator=g),
    }


def parity(tmp_path, task: str, unused: int = 0, **over):
    problem = "single" if task == "ForSequenceClassification" else ""
    model = tiny(task, **task_config(task, problem, over))
    shape = (2, 3, 9) if task == "ForMultipleChoice" else (2, 9)
    feed = inputs(shape)
    labels = labels_for(task, problem, shape, feed["attention_mask"])
    ours_labels = labels.get("labels")
    if "start_positions" in labels:
        ours_labels = torch.stack([labels["start_positions"], labels["end_positions"]], -1)
    return check_parity(tmp_path, model, feed, labels, ours_labels, unused=unused)


@pytest.mark.parametrize("task", sorted(TASKS))
def test_every_task_matches_transformers_with_a_padded_row(tmp_path, task):
    ours = parity(tmp_path, task)
    assert ours.spec.data["head"]["kind"] == TASKS[task]
    assert ours.spec.data["block"]["kind"] == "bottleneck"
    assert ours.hf_source["model_type"] == "mobilebert"


@pytest.mark.parametrize("over", VARIANTS, ids=lambda o: ",".join(map(str, o)))
def test_transformers_switches_match_on_the_headless_model(tmp_path, over):
    """With use_bottleneck_attention transformers builds the q/k bottleneck and never reads
    it (2 layers x (dense 32 -> 16, its norm)): import leaves it out."""
    unused = 2 * (32 * 16 + 16 + 2 * 16) if over.get("use_bottleneck_attention") else 0
    parity(tmp_path, "Model", unused=unused, **over)


@pytest.mark.parametrize("task", ["Model", "ForSequenceClassification", "ForMultipleChoice"])
def test_without_classifier_activation_the_pooler_is_the_first_token(tmp_path, task):
    """classifier_activation false: transformers' pooler is the first token's state, no
    dense + tanh; the heads that read it import with pooler false and (headless and
    sequence classification) export it back."""
    ours = parity(tmp_path, task, classifier_activation=False)
    assert ours.spec.data["head"]["pooler"] is False
    if task == "ForMultipleChoice":  # to_hf's probe feeds (B, T) ids, which it refuses
        return
    archzoo.to_hf(ours, tmp_path / "out")
    back = hf.AutoConfig.from_pretrained(tmp_path / "out")
    assert back.classifier_activation is False


def test_pretraining_imports_its_masked_lm_head(tmp_path):
    """ForPreTraining's prediction logits from the MLM head; its next-sentence head and the
    pooler (which only that head reads) are left out."""
    model = tiny("ForPreTraining")
    feed = inputs((2, 9))
    ours = archzoo.from_hf(_saved(model, tmp_path))
    with torch.no_grad():
        ref, got = model(**feed).prediction_logits, ours(**feed).logits
    real = feed["attention_mask"].bool()
    assert (ref - got)[real].abs().max().item() <= 1e-4
    unused = 32 * 32 + 32 + 2 * 32 + 2  # pooler.dense, cls.seq_relationship
    assert ours.num_parameters() == sum(p.numel() for p in model.parameters()) - unused


def _saved(model, tmp_path):
    model.save_pretrained(tmp_path / "hf")
    return tmp_path / "hf"


def test_affine_norm_scales_and_shifts_without_normalising():
    norm = archzoo.build_model(_spec(), device="cpu").encoder.blocks[0].attention_norm
    assert norm.name == "affine"
    with torch.no_grad():
        norm.weight.copy_(torch.linspace(-2, 2, 16))
        norm.bias.copy_(torch.linspace(0, 1, 16))
    x = torch.randn(2, 3, 16) * 5 + 3
    assert torch.equal(norm(x), x * norm.weight + norm.bias)


def test_trigram_projection_equals_a_hand_computation():
    """Each token's [next | own | previous] table vectors (zeros past the ends) through the
    projection, then types, positions and the norm at d_model."""
    model = archzoo.build_model(_spec(), device="cpu").eval()
    perturb(model)
    emb = model.encoder.embedding
    ids, types = torch.tensor([[5, 9, 11, 4]]), torch.tensor([[0, 1, 1, 0]])
    w = emb.word.weight
    zero = torch.zeros(8)
    rows = []
    for t in range(4):
        nxt = w[ids[0, t + 1]] if t < 3 else zero
        prev = w[ids[0, t - 1]] if t > 0 else zero
        rows.append(emb.project.weight @ torch.cat([nxt, w[ids[0, t]], prev]) + emb.project.bias)
    pos = model.encoder.position.table.weight[:4]
    want = emb.norm(torch.stack(rows) + emb.token_type.weight[types[0]] + pos)
    with torch.no_grad():
        got = emb(ids, types, model.encoder.position.embed(torch.arange(4)[None]))
    torch.testing.assert_close(got[0], want, atol=1e-6, rtol=0)


def test_bottleneck_block_equals_a_hand_computation():
    """One layer by hand in float64: input and q/k bottlenecks, softmax attention with v
    from the full-width input, residual + norm, three FFNs, the output bottleneck."""
    model = archzoo.build_model(_spec(), device="cpu", dtype=torch.float64).eval()
    perturb(model)
    block = model.encoder.blocks[0]
    x = torch.randn(1, 5, 32, dtype=torch.float64)
    lin = lambda m, t: t @ m.weight.T + m.bias  # noqa: E731
    aff = lambda n, t: t * n.weight + n.bias  # noqa: E731
    res = aff(block.in_norm, lin(block.in_proj, x))
    qk = aff(block.qk_norm, lin(block.qk_proj, x))
    att = block.attention
    heads = lambda t: t.view(1, 5, 4, 4).transpose(1, 2)  # noqa: E731
    q, k, v = heads(lin(att.q, qk)), heads(lin(att.k, qk)), heads(lin(att.v, x))
    probs = torch.softmax(q @ k.transpose(-1, -2) / 2.0, -1)  # 1 / sqrt(4)
    a = lin(att.out, (probs @ v).transpose(1, 2).reshape(1, 5, 16))
    h = aff(block.attention_norm, a + res)
    mlp = lambda f, t: lin(f.fc_out, torch.relu(lin(f.fc_in, t)))  # noqa: E731
    for f, n in zip(block.ffns, block.ffn_norms, strict=True):
        h = aff(n, mlp(f, h) + h)
    h = aff(block.ffn_norm, mlp(block.ffn, h) + h)
    want = aff(block.out_norm, lin(block.out_proj, h) + x)
    ctx = AttentionContext(AttentionMask.build(5, 5, causal=False, device=x.device))
    with torch.no_grad():
        got = block(x, ctx)
    torch.testing.assert_close(got, want, atol=1e-10, rtol=0)


def test_decoder_extension_joins_the_tied_table_and_its_own_columns():
    """logits = features @ [table | extension].T + bias, the table the token embedding's."""
    model = archzoo.build_model(_spec(), device="cpu").eval()
    perturb(model)
    head = model.head
    assert head.decoder.weight is model.encoder.embedding.word.weight
    hidden = torch.randn(2, 3, 32)
    feats = head.norm(torch.relu(head.dense(hidden)))
    want = feats[..., :8] @ head.decoder.weight.T + feats[..., 8:] @ head.extension.weight.T
    with torch.no_grad():
        torch.testing.assert_close(head(hidden), want + head.bias, atol=1e-5, rtol=0)
    assert isinstance(head.norm, torch.nn.LayerNorm) and head.norm.eps == 1e-12


def _spec(**over) -> dict:
    spec = dict(
        name="tiny-mobilebert",
        family="encoder",
        vocab_size=V,
        d_model=32,
        n_layers=2,
        n_heads=4,
        head_dim=4,
        d_ff=24,
        max_len=64,
        dropout=0.0,
        pad_token_id=0,
        embedding=dict(
            kind="factorized",
            embedding_size=8,
            type_vocab_size=2,
            norm=True,
            project="tokens",
            trigram=True,
        ),
        position="learned",
        attention=dict(kind="mha", fused_qkv=False, value_width=32),
        block=dict(kind="bottleneck", inner_dim=16, attention_input="qk_bottleneck", n_ffn=3),
        norm="affine",
        ffn=dict(kind="mlp", activation="relu"),
        head=dict(
            kind="mlm",
            activation="relu",
            width=32,
            decoder_extension=True,
            transform_norm_eps=1e-12,
        ),
    )
    spec.update(over)
    return spec


@pytest.mark.parametrize(
    ("over", "message"),
    [
        (
            {"normalization_type": "layer_norm"},
            "normalization_type='layer_norm' with layer_norm_eps=1e-12",
        ),
        (
            {"key_query_shared_bottleneck": False},
            "neither key_query_shared_bottleneck nor use_bottleneck_attention",
        ),
        ({"trigram_input": False, "embedding_size": 32}, "holds an embedding_transformation"),
    ],
)
def test_settings_archzoo_cannot_match_are_refused_by_name(over, message):
    config = hf.MobileBertConfig(**{**TINY, **over}).to_dict()
    with pytest.raises(ConversionError, match=message.replace("(", r"\(")):
        get_registry().converter("mobilebert").to_spec(config)


@pytest.mark.parametrize(
    ("block", "attention", "message"),
    [
        ({"attention_input": "inner"}, {}, "'inner' needs an inner_dim"),
        ({"inner_dim": 16}, {}, "'input' \\(q and k at d_model\\) needs inner_dim: null"),
    ],
)
def test_bottleneck_block_checks_name_the_key(block, attention, message):
    spec = _spec(block={"kind": "bottleneck", **block}, attention={"kind": "mha", **attention})
    with pytest.raises(SpecError, match=message):
        archzoo.load_spec(spec)


def test_value_width_needs_the_bottleneck_block_to_feed_it():
    spec = _spec(block={"kind": "bottleneck", "inner_dim": 16, "attention_input": "inner"})
    with pytest.raises(ValueError, match="needs attention.value_width None"):
        archzoo.build_model(spec, device="meta")
