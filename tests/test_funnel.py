"""Funnel Transformer (issue 33): its mechanisms, each against an independent reference, and
every task class transformers has within 1e-4 of transformers on a tiny perturbed model with
a padded row. The mechanisms: the stack's stream steps (pooling pairs of positions before a
layer, upsampling back with the kept stream: archzoo.parts.stream) and the pooled_relative
attention (content, distance-sinusoid and segment terms over pooled positions). The export
round trip is here and in tests/test_export.py's sweep; the zoo spec's count is
tests/test_zoo_counts.py's."""

from __future__ import annotations

import math

import pytest
import torch
import transformers as hf
from hf_util import V, perturb
from test_encoders import check_parity, labels_for, task_config

import archzoo
from archzoo.hf.probe import model_class
from archzoo.parts.converter import ConversionError
from archzoo.parts.interfaces import AttentionContext
from archzoo.parts.masks import AttentionMask
from archzoo.parts.registry import get_registry
from archzoo.parts.stream import StreamState, pair_pool, pool_index, upsample

# three blocks (1, 2, 1 layers), one decoder layer; 2 heads of 8 on d_model 32
TINY = dict(
    vocab_size=V,
    block_sizes=[1, 2, 1],
    num_decoder_layers=1,
    d_model=32,
    n_head=2,
    d_head=8,
    d_inner=48,
)
TASKS = {  # transformers' class suffix -> archzoo head kind
    "Model": "none",
    "BaseModel": "none",
    "ForMaskedLM": "mlm",
    "ForPreTraining": "discriminator",
    "ForSequenceClassification": "classifier",
    "ForTokenClassification": "token_classifier",
    "ForQuestionAnswering": "question_answering",
    "ForMultipleChoice": "multiple_choice",
}
# transformers' switches besides the defaults (separate_cls, truncate_seq, pool_q_only, mean)
VARIANTS = [
    {"pooling_type": "max", "pool_q_only": False},
    {"separate_cls": False, "truncate_seq": False},
    {"separate_cls": True, "truncate_seq": False, "pooling_type": "max"},
    {"block_sizes": [2], "num_decoder_layers": 2},  # no pooling: the decoder adds 2x the stream
    {"hidden_act": "gelu", "layer_norm_eps": 1e-5},
]


def tiny(task: str, **over) -> torch.nn.Module:
    config = hf.FunnelConfig(**{**TINY, **over})
    torch.manual_seed(0)
    model = model_class(get_registry().converter("funnel"), task, config, None)(config)
    perturb(model)
    return model.eval()


def inputs(shape: tuple[int, ...], left: bool = False) -> dict[str, torch.Tensor]:
    """Random ids; token types [CLS] = 2 then segments 0 and 1; the last row padded after 7
    tokens (or, `left`, before its last 7)."""
    g = torch.Generator().manual_seed(1)
    mask = torch.ones(shape, dtype=torch.long)
    row = mask[(-1,) * (len(shape) - 1)]
    row[: shape[-1] - 7] = 0 if left else 1
    row[7:] = 1 if left else 0
    ids = torch.randint(3, V, shape, generator=g).masked_fill(mask == 0, 0)
    types = torch.zeros(shape, dtype=torch.long)
    types[..., shape[-1] // 2 :] = 1
    types[..., 0] = 2
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


def parity(tmp_path, task: str, length: int = 11, left: bool = False, **over):
    problem = "single" if task == "ForSequenceClassification" else ""
    model = tiny(task, **task_config(task, problem, over))
    shape = (2, 3, length) if task == "ForMultipleChoice" else (2, length)
    feed = inputs(shape, left)
    labels = labels_for(task, problem, shape, feed["attention_mask"])
    ours_labels = labels.get("labels")
    if "start_positions" in labels:
        ours_labels = torch.stack([labels["start_positions"], labels["end_positions"]], -1)
    return check_parity(tmp_path, model, feed, labels, ours_labels)


@pytest.mark.parametrize("task", sorted(TASKS))
def test_every_task_matches_transformers_with_a_padded_row(tmp_path, task):
    ours = parity(tmp_path, task)
    assert ours.spec.data["head"]["kind"] == TASKS[task]
    assert ours.spec.data["attention"]["kind"] == "pooled_relative"
    assert ours.hf_source["model_type"] == "funnel"
    decoder = task not in ("BaseModel", "ForSequenceClassification", "ForMultipleChoice")
    assert ours.spec.data["n_layers"] == 4 + decoder


@pytest.mark.parametrize("over", VARIANTS, ids=lambda o: ",".join(map(str, o)))
@pytest.mark.parametrize("task", ["Model", "BaseModel"])
def test_transformers_switches_match_on_the_headless_models(tmp_path, task, over):
    parity(tmp_path, task, length=12, left=True, **over)


@pytest.mark.parametrize("length", [5, 6])
def test_short_rows_match_where_transformers_stops_pooling(tmp_path, length):
    """A stream of 2 positions (separate_cls) is not pooled further, as in transformers: 5
    and 6 tokens pool to 3 then 2 in the second block, which the third keeps. (Rows of 3 or
    4 tokens fail inside transformers' own forward.)"""
    parity(tmp_path, "Model", length=length)


@pytest.mark.parametrize("task", ["Model", "BaseModel", "ForMaskedLM", "ForSequenceClassification"])
def test_export_round_trip_loads_in_transformers_with_equal_outputs(tmp_path, task):
    problem = "single" if task == "ForSequenceClassification" else ""
    model = tiny(task, **task_config(task, problem, {"pooling_type": "max"}))
    ours = archzoo.from_hf(_saved(model, tmp_path))
    report = archzoo.to_hf(ours, tmp_path / "out")
    assert report["architecture"] == "Funnel" + task
    back = getattr(hf, "Funnel" + task).from_pretrained(tmp_path / "out").eval()
    assert back.config.pooling_type == "max" and back.config.block_sizes == [1, 2, 1]
    feed = inputs((2, 11))
    with torch.no_grad():
        a, b = model(**feed), back(**feed)
    name = "last_hidden_state" if "Model" in task else "logits"
    assert (getattr(a, name) - getattr(b, name)).abs().max().item() <= 1e-5


def _saved(model, tmp_path):
    model.save_pretrained(tmp_path / "hf")
    return tmp_path / "hf"


@pytest.mark.parametrize(
    ("over", "message"),
    [
        (
            {"attention_type": "factorized"},
            "config.json attention_type='factorized' is not supported (only 'relative_shift')",
        ),
        (
            {"block_repeats": [1, 2, 1]},
            "config.json block_repeats=[1, 2, 1]: a block's layers run again with the same "
            "weights, which archzoo's funnel layout does not express (only 1s)",
        ),
    ],
)
def test_unexpressed_variants_are_refused_by_name(tmp_path, over, message):
    with pytest.raises(ConversionError) as err:
        archzoo.from_hf(_saved(tiny("Model", **over), tmp_path))
    assert message in str(err.value)


# ----------------------------------------------------------------- the stream steps, by loops


def _pool_loop(x, mode, sep, cut):
    """Pairs of positions along dim 1 by explicit lists (the first alone with sep)."""
    rows = list(x.unbind(1))
    if sep:
        rows = [rows[0]] + (rows[:-1] if cut else rows)
    out = []
    for a in range(0, len(rows), 2):
        pair = torch.stack(rows[a : a + 2])
        out.append({"mean": pair.mean(0), "max": pair.amax(0), "min": pair.amin(0)}[mode])
    return torch.stack(out, 1)


@pytest.mark.parametrize("length", [1, 2, 5, 8])
@pytest.mark.parametrize(("sep", "cut"), [(True, True), (True, False), (False, False)])
@pytest.mark.parametrize("mode", ["mean", "max", "min"])
def test_pair_pool_equals_a_loop_over_pairs(length, sep, cut, mode):
    x = torch.randn(2, length, 3, dtype=torch.float64)
    torch.testing.assert_close(pair_pool(x, mode, sep, cut), _pool_loop(x, mode, sep, cut))
    index = torch.arange(length)
    want = _pool_loop(index[None, :, None].double(), "min", sep, cut)[0, :, 0].long()
    assert torch.equal(pool_index(index, sep, cut), want)  # the first of each pair


@pytest.mark.parametrize(("sep", "cut"), [(True, True), (True, False), (False, False)])
def test_upsample_repeats_each_position_back_to_the_input_length(sep, cut):
    x = torch.arange(4.0)[None, :, None]  # (1, 4, 1): positions 0..3
    got = upsample(x, 4, 13, sep, cut)[0, :, 0].tolist()
    if sep:  # the first alone, then each of the rest 4 times (cut: shifted by stride - 1 pads)
        rest = [v for v in (1.0, 2.0, 3.0) for _ in range(4)]
        want = [0.0] + (rest + [0.0] * 3)[:12]
    else:
        want = [v for v in (0.0, 1.0, 2.0, 3.0) for _ in range(4)][:13]
    assert got == want


# --------------------------------------------------- the attention against a dense float64 loop


def _attention_loop(att, x, keys, state, keep):
    """Every score by its formula, one (head, query, key) at a time, in float64."""
    H, hd, d = att.heads, att.head_dim, att.dims.d_model
    lin = lambda m, t: t @ m.weight.T + (0 if m.bias is None else m.bias)  # noqa: E731
    q = lin(att.q, x).view(*x.shape[:2], H, hd)
    k = lin(att.k, keys).view(*keys.shape[:2], H, hd)
    v = lin(att.v, keys).view(*keys.shape[:2], H, hd)
    qi, ki = state.query_index.tolist(), state.key_index.tolist()

    def pos(i, level):
        return 1 - 2**level if state.separate_first and i == 0 and level else i

    def sinusoid(r):
        f = [r / 10000 ** (j / (d // 2)) for j in range(d // 2)]
        return torch.tensor(
            [math.sin(a) for a in f] + [math.cos(a) for a in f], dtype=torch.float64
        )

    types = state.token_type_ids
    out = torch.zeros(x.shape[0], x.shape[1], H, hd, dtype=torch.float64)
    for b in range(x.shape[0]):
        for h in range(H):
            for i in range(len(qi)):
                scores = []
                for j in range(len(ki)):
                    r = sinusoid(pos(qi[i], state.query_level) - pos(ki[j], state.key_level))
                    rk = torch.einsum("d,de->e", r, att.position_kernel[:, h])
                    ti, tj = types[b, qi[i]].item(), types[b, ki[j]].item()
                    same = ti == tj or 2 in (ti, tj)
                    c = 0.0 if state.separate_first and (qi[i] == 0 or ki[j] == 0) else 1.0
                    s = (q[b, i, h] + att.content_bias[h]) @ k[b, j, h]
                    s = s + c * (q[b, i, h] + att.position_bias[h]) @ rk
                    s = s + c * (q[b, i, h] + att.segment_bias[h]) @ att.segment_embed[int(same), h]
                    scores.append(s / math.sqrt(hd) if keep[b, j] else s.new_tensor(-math.inf))
                p = torch.softmax(torch.stack(scores), 0)
                out[b, i, h] = (p[:, None] * v[b, :, h]).sum(0)
    return lin(att.out, out.reshape(*x.shape[:2], H * hd))


@pytest.mark.parametrize("separate_first", [True, False])
def test_pooled_relative_attention_equals_a_dense_loop(separate_first):
    """Pooled queries (level 1) attending to the stream before pooling (level 0), padding."""
    spec = {
        "family": "encoder",
        "vocab_size": V,
        "d_model": 16,
        "n_layers": 1,
        "n_heads": 2,
        "position": "none",
        "attention": {"kind": "pooled_relative", "separate_first": separate_first},
    }
    att = archzoo.build_model(spec, dtype=torch.float64).encoder.blocks[0].attention.eval()
    perturb(att, scale=0.3)
    x, keys = torch.randn(2, 4, 16, dtype=torch.float64), torch.randn(2, 7, 16, dtype=torch.float64)
    types = torch.tensor([[2, 0, 0, 0, 1, 1, 1], [2, 0, 1, 1, 1, 0, 0]])
    k_index = torch.arange(7)
    q_index = pool_index(k_index, separate_first, True)[:4]
    state = StreamState(q_index, k_index, 1, 0, separate_first, keys, types)
    keep = torch.tensor([[True] * 7, [True] * 5 + [False] * 2])
    mask = AttentionMask.build(4, 7, causal=False, key_padding=keep)
    with torch.no_grad():
        got = att(x, AttentionContext(mask, stream=state))
        want = _attention_loop(att, x, keys, state, keep)
    torch.testing.assert_close(got, want, atol=1e-10, rtol=0)


def test_packed_rows_and_misplaced_upsampling_are_refused():
    small = {"d_model": 16, "n_heads": 2, "d_ff": 16, "vocab_size": V}
    model = archzoo.build_model("funnel-small", small).eval()
    ids = torch.randint(0, V, (1, 10))
    with pytest.raises(ValueError) as err:
        model(ids, document_ids=torch.tensor([[0] * 5 + [1] * 5]))
    assert "document_ids (packed rows): layers that pool or upsample the stream" in str(err.value)
    with pytest.raises(archzoo.SpecError) as err:
        layers = [{"select": [2], "attention": {"upsample_from": 2}}]
        archzoo.load_spec("funnel-small", {**small, "layers": layers})
    assert "layers: layer 2: upsample_from 2 is not an earlier layer" in str(err.value)
