"""Packed rows (document_ids): attention stays inside each document, positions restart.

Oracles: the same document run alone in a row of its own (equal logits), the packed row
with another document 1 (doc 2 unchanged), autograd (no gradient crosses documents), and
the dense masked computation for the sparse paths.
"""

from __future__ import annotations

import itertools
import json
import math
import random
import re
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from conftest import tiny
from test_sparse_attention import patterns
from test_train import DECODER, ENCODER, SEQ2SEQ, SMALL, WORDS, config

import archzoo
from archzoo.cli.main import main
from archzoo.model.documents import document_positions, document_runs
from archzoo.parts.masks import AttentionMask
from archzoo.plugins.attention.kernels.flex import mask_flex
from archzoo.plugins.attention.sparse import attend
from archzoo.training import train
from archzoo.training.data import prepare_stream
from archzoo.training.loop import batch_loss
from archzoo.training.objectives import IGNORE, CausalLM, Packed
from archzoo.training.packing import PAD_DOCUMENT, best_fit, document_spans
from archzoo.training.tokenizer import ByteTokenizer

T1, T2, T3 = 7, 11, 5  # document lengths of the packed test row

GPT2 = {
    "position": "learned",
    "attention": {"kind": "mha"},
    "block": "pre_ln",
    "norm": "layernorm",
    "ffn": {"kind": "mlp", "activation": "gelu_tanh"},
}
LLAMA = {
    "position": "rotary",
    "attention": {"kind": "mha", "n_kv_heads": 2, "bias": False},
    "block": "pre_ln",
    "norm": "rmsnorm",
    "ffn": {"kind": "glu", "activation": "swiglu"},
}
T5 = {
    "family": "encoder-decoder",
    "position": {"kind": "t5_relative", "n_buckets": 8, "max_distance": 16},
    "attention": {"kind": "mha", "bias": False, "scale": 1.0},
    "block": "pre_ln",
    "norm": "rmsnorm",
    "ffn": {"kind": "mlp", "activation": "relu", "bias": False},
}
LIKE = {"gpt2": GPT2, "llama": LLAMA, "t5": T5}
# one spec per position scheme: (family, position, attention)
SCHEMES = {
    "learned": ("decoder", "learned", "mha"),
    "sinusoidal": ("encoder", "sinusoidal", "mha"),
    "rotary": ("decoder", "rotary", "mha"),
    "alibi": ("decoder", "alibi", "mha"),
    "t5_relative": ("encoder-decoder", {"kind": "t5_relative", "max_distance": 16}, "mha"),
    "relative": ("encoder", {"kind": "relative", "max_distance": 4, "value_term": True}, "mha"),
    "deberta_relative": (
        "encoder",
        {"kind": "deberta_relative", "max_distance": 8},
        {"kind": "disentangled", "terms": ["c2p", "p2c"]},
    ),
    "none": ("decoder", "none", "mha"),
}
HEAD = {"decoder": "lm", "encoder": "mlm", "encoder-decoder": "lm"}
# attention kinds with the settings that make a 40-token row span several blocks
ATTENTIONS = {
    "mha": {},
    "mla": {"kv_lora_rank": 16, "qk_nope_head_dim": 8},
    "disentangled": {"terms": ["c2p"]},
    "local": {"window": 5, "block": 8},
    "strided": {"stride": 4, "block": 8},
    "fixed": {"stride": 8, "summary": 2, "block": 8},
    "block_sparse": {"block": 4, "global_blocks": 1, "stride_blocks": 3},
    "bigbird": {"block": 4, "random_blocks": 2},
    "longformer": {"window": 6, "block": 8, "global_tokens": [0, 20]},
    "block_local": {"radius": 3},
    "transient_global": {"radius": 3, "global_block": 4},
    "global_local": {"block_size": 8, "block": 8},  # no global tokens: blocks of 8
    "span_conv": {"conv_kernel_size": 5},  # taps across a boundary read zeros
    "pooled_relative": {},  # no pooling, no separate first position: distances are per pair
    "chunked": {"chunk": 8, "block": 8},  # Llama 4's chunks, counted from the row's start
    "shared_transformer": {"mixer": {"kind": "mamba2", "head_dim": 16, "chunk_size": 8}},
    # recurrent mixers: chunks of 8, so documents start inside a chunk and the state restarts
    "gated_deltanet": {"chunk_size": 8},
    "mamba2": {"head_dim": 16, "state_size": 8, "chunk_size": 8},
    "short_conv": {},
    "mamba": {"state_size": 4, "chunk_size": 8},
    "lightning": {"block_size": 8},
    "kimi_delta": {"n_heads": 2, "chunk_size": 8},
    "gated_mha": {"n_kv_heads": 2},
    "diff_mha": {"n_kv_heads": 2},
    "moa": {"n_experts": 4, "top_k": 2},  # n_heads / 2 shared kv heads
    "none": {},
    "side_by_side": {"mixers": [{"kind": "mamba2", "head_dim": 16, "chunk_size": 8}, "mha"]},
}


def build(**spec: object) -> archzoo.ZooModel:
    torch.manual_seed(0)
    family = spec.get("family", "decoder")
    full = {"name": "packed", "family": family, **tiny(), "head": {"kind": HEAD[family]}}
    return archzoo.build_model({**full, **spec}).eval()


def packed_row(*docs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(1, T) ids of the documents back to back and (1, T) document ids 10, 11, ..."""
    ids = torch.cat(docs)[None]
    doc_ids = torch.cat([torch.full((len(d),), 10 + i) for i, d in enumerate(docs)])[None]
    return ids, doc_ids


def logits(model: archzoo.ZooModel, ids: torch.Tensor, docs: torch.Tensor | None) -> torch.Tensor:
    """Logits of a row (packed when `docs`); encoder-decoder rows feed both sides."""
    if model.family == "encoder-decoder":
        packed = {} if docs is None else {"document_ids": docs, "decoder_document_ids": docs}
        return model(ids, decoder_input_ids=ids, **packed).logits
    return model(ids, **({} if docs is None else {"document_ids": docs})).logits


def documents(g: torch.Generator) -> list[torch.Tensor]:
    return [torch.randint(0, 50, (n,), generator=g) for n in (T1, T2, T3)]


@pytest.mark.parametrize("like", sorted(LIKE))
def test_other_documents_leave_a_document_unchanged(like: str) -> None:
    model = build(**LIKE[like])
    g = torch.Generator().manual_seed(1)
    a, b, c = documents(g)
    ids, docs = packed_row(a, b, c)
    other, _ = packed_row(torch.randint(0, 50, (T1,), generator=g), b, 49 - c)
    with torch.no_grad():
        before, after = logits(model, ids, docs), logits(model, other, docs)
    span = slice(T1, T1 + T2)
    assert (before[:, span] - after[:, span]).abs().max() <= 1e-6
    assert (before[:, :T1] - after[:, :T1]).abs().max() > 1e-3  # the change did reach doc 1


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
def test_a_packed_document_equals_the_document_alone(scheme: str) -> None:
    family, position, attention = SCHEMES[scheme]
    model = build(family=family, position=position, attention=attention)
    a, b, c = documents(torch.Generator().manual_seed(2))
    ids, docs = packed_row(a, b, c)
    with torch.no_grad():
        packed = logits(model, ids, docs)[:, T1 : T1 + T2]
        alone = logits(model, b[None], None)
    assert (packed - alone).abs().max() <= 1e-5


@pytest.mark.parametrize("like", sorted(LIKE))
def test_no_gradient_crosses_documents(like: str) -> None:
    model = build(**LIKE[like])
    a, b, c = documents(torch.Generator().manual_seed(3))
    ids, docs = packed_row(a, b, c)
    embedded = []

    def keep(module: torch.nn.Module, args: tuple, out: torch.Tensor) -> torch.Tensor:
        out.retain_grad()
        embedded.append(out)
        return out

    for stack in (model.encoder, model.decoder):
        if stack is not None:
            stack.embedding.register_forward_hook(keep)
    logits(model, ids, docs)[:, T1 : T1 + T2].square().sum().backward()
    for x in embedded:  # every stack's embeddings: only document 2's rows get a gradient
        grad = x.grad[0]
        assert torch.count_nonzero(grad[:T1]) == 0
        assert torch.count_nonzero(grad[T1 + T2 :]) == 0
        assert grad[T1 : T1 + T2].abs().sum() > 0


@pytest.mark.parametrize("kind", sorted(c.name for c in archzoo.list_components("attention")))
def test_every_attention_keeps_to_documents(kind: str) -> None:
    """Each registered attention intersects its pattern with the documents (40-token rows
    over several blocks: the blocked O(n * w) paths run)."""
    cls = next(c for c in archzoo.list_components("attention") if c.name == kind)
    family = "decoder" if cls.capabilities.causal else "encoder"
    if kind == "ngram_streams":  # ProphetNet's predicting streams: one document per row
        model = build(family=family, attention={"kind": kind},
                      embedding={"kind": "token", "predict_streams": 2})  # fmt: skip
        ids, docs = packed_row(torch.arange(5), torch.arange(7))
        with pytest.raises(ValueError, match=r"document_ids \(packed rows\) cannot be used"):
            logits(model, ids, docs)
        return
    spec = {"family": family, "attention": {"kind": kind, **ATTENTIONS[kind]}}
    if kind == "disentangled":
        spec["position"] = {"kind": "deberta_relative", "max_distance": 8}
    if kind in ("block_local", "transient_global", "global_local", "span_conv"):
        spec["position"] = "none"
    model = build(**spec)
    g = torch.Generator().manual_seed(4)
    lengths = (13, 17, 10)  # document 2 straddles blocks
    parts = [torch.randint(0, 50, (n,), generator=g) for n in lengths]
    ids, docs = packed_row(*parts)
    other, _ = packed_row(49 - parts[0], parts[1], 49 - parts[2])
    with torch.no_grad():
        before, after = logits(model, ids, docs), logits(model, other, docs)
    span = slice(lengths[0], lengths[0] + lengths[1])
    assert (before[:, span] - after[:, span]).abs().max() <= 1e-6


@pytest.mark.parametrize("name", sorted(patterns(40)))
@pytest.mark.parametrize("causal", [False, True])
def test_blocked_paths_equal_dense_with_documents(name: str, causal: bool) -> None:
    """The O(n * w) blocked path of every pattern, intersected with documents, equals the
    dense masked computation; padding joins in."""
    T = 40
    pattern = patterns(T)[name]
    g = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(2, 4, T, 8, generator=g) for _ in range(3))
    ids = torch.tensor([[0] * 9 + [1] * 20 + [2] * 11, [5] * 30 + [6] * 10])
    padding = torch.ones(2, T, dtype=torch.bool)
    padding[1, 35:] = False
    mask = AttentionMask(
        T, T, causal=causal, key_padding=padding, pattern=pattern, key_docs=document_runs(ids)
    )
    dense = attend(q, k, v, mask, impl="dense")
    blocked = attend(q, k, v, mask, impl="blocked")
    assert (dense - blocked).abs().max() <= 1e-5
    keep = mask.allowed()[:, 0]  # (B, T, T): no key of another document
    runs = document_runs(ids)
    assert not (keep & (runs[:, :, None] != runs[:, None, :])).any()


def test_flex_mask_mod_is_the_dense_mask() -> None:
    """FlexAttention's mask_mod (its BlockMask) says what the dense mask says."""
    T = 12
    ids = torch.tensor([[3] * 5 + [4] * 7, [1] * 12])
    mask = AttentionMask(T, T, causal=True, key_docs=document_runs(ids))
    b, q, k = torch.meshgrid(torch.arange(2), torch.arange(T), torch.arange(T), indexing="ij")
    via_mod = mask.mask_mod()(b, torch.zeros_like(b), q, k)
    assert torch.equal(via_mod, mask.allowed()[:, 0])


@pytest.mark.filterwarnings("ignore:.*flex_attention.*:UserWarning")
@pytest.mark.parametrize("name", ["plain", "local", "bigbird"])
def test_flex_attention_under_documents_equals_dense(name: str) -> None:
    """FlexAttention (eager here; compiled on CUDA) under the documents' BlockMask, with and
    without a sparse pattern, gives the dense masked result."""
    T = 40
    pattern = None if name == "plain" else patterns(T)[name]
    g = torch.Generator().manual_seed(6)
    q, k, v = (torch.randn(2, 4, T, 8, generator=g) for _ in range(3))
    ids = torch.tensor([[0] * 9 + [1] * 20 + [2] * 11, [5] * 30 + [6] * 10])
    mask = AttentionMask(T, T, causal=True, pattern=pattern, key_docs=document_runs(ids))
    flex = mask_flex(q, k, v, mask, scale=None)
    dense = torch.nn.functional.scaled_dot_product_attention(q, k, v, **mask.sdpa())
    assert (flex - dense).abs().max() <= 1e-5


def test_documents_are_runs_and_positions_restart() -> None:
    ids = torch.tensor([[7, 7, 3, 3, 3, 7], [1, 1, 1, 1, 1, 1]])
    runs = document_runs(ids)
    assert runs.tolist() == [[0, 0, 1, 1, 1, 2], [0, 0, 0, 0, 0, 0]]
    assert document_positions(runs).tolist() == [[0, 1, 0, 1, 2, 0], [0, 1, 2, 3, 4, 5]]


def test_bad_document_ids_are_refused() -> None:
    model = build(**GPT2)
    ids = torch.randint(0, 50, (2, 6))
    with pytest.raises(ValueError, match=r"document_ids must have the shape of input_ids \(2, 6\)"):
        model(ids, document_ids=torch.zeros(2, 5, dtype=torch.long))
    with pytest.raises(ValueError, match="document_ids must be an integer tensor"):
        model(ids, document_ids=torch.zeros(2, 6))
    with pytest.raises(ValueError, match="cannot be used with a KV cache"):
        model(ids, document_ids=torch.zeros(2, 6, dtype=torch.long), cache=model.new_cache(2, 8))
    t5 = build(**T5)
    with pytest.raises(ValueError, match="document_ids was given alone"):
        t5(ids, decoder_input_ids=ids, document_ids=torch.zeros(2, 6, dtype=torch.long))
    with pytest.raises(ValueError, match="needs the documents of both sides"):
        t5.decoder(ids, memory=torch.zeros(2, 6, 32), documents=torch.zeros(2, 6, dtype=torch.long))


# ---------------------------------------------------------------- zoo train --pack


def write_jsonl(path: Path, docs: int = 200, seed: int = 0) -> list[str]:
    """A JSONL corpus of documents of 1 to 40 words; returns their texts."""
    rng = random.Random(seed)
    texts = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 40))) for _ in range(docs)]
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
    return texts


def test_documents_end_at_records_files_and_the_end_of_document_token(tmp_path) -> None:
    texts = write_jsonl(tmp_path / "a.jsonl", docs=5)
    (tmp_path / "b.txt").write_text("plain file", encoding="utf-8")
    tok = ByteTokenizer()
    stream = prepare_stream([tmp_path / "a.jsonl", tmp_path / "b.txt"], tok, tmp_path / "cache")
    lengths = [len(t.encode()) + 1 for t in [*texts, "plain file"]]  # each ends with eos
    assert stream.ends.tolist() == list(itertools.accumulate(lengths))
    spans = document_spans(stream.tokens, stream.ends, tok.specials.eos, 0, len(stream), 1000)
    assert [n for _, n in spans] == lengths
    # an eos inside a record splits it too; a piece never exceeds the row
    tokens = torch.tensor([1, 2, 258, 3, 4, 5, 6, 7, 258])
    spans = document_spans(tokens, torch.tensor([9]), 258, 0, 9, 4)
    assert spans == [(0, 3), (3, 4), (7, 2)]


def test_best_fit_places_every_document_once_within_the_rows() -> None:
    assert best_fit([6, 5, 4, 3, 2], 10) == [[0, 2], [1, 3, 4]]
    rng = random.Random(0)
    lengths = [rng.randint(1, 64) for _ in range(500)]
    rows = best_fit(lengths, 64)
    assert sorted(i for row in rows for i in row) == list(range(500))
    assert all(sum(lengths[i] for i in row) <= 64 for row in rows)
    assert len(rows) <= math.ceil(sum(lengths) / 64) * 1.05  # near the lower bound


def packed_objective(tmp_path: Path, family_objective: type, **extra: object) -> Packed:
    write_jsonl(tmp_path / "c.jsonl")
    tok = ByteTokenizer()
    stream = prepare_stream([tmp_path / "c.jsonl"], tok, tmp_path / "cache")
    inner = family_objective(stream, 64, 0, 0.1, tok.specials, *extra.values())
    return Packed(inner, stream, tok.specials.pad)


def test_packed_causal_rows_hold_whole_documents_and_targets_stay_inside(tmp_path) -> None:
    objective = packed_objective(tmp_path, CausalLM)
    batch = objective.train_batch(1, 8, slice(0, 8))
    ids, docs, labels = batch["input_ids"], batch["document_ids"], batch["labels"]
    assert ids.shape == docs.shape == labels.shape == (8, 64)
    scored = labels != IGNORE
    assert torch.equal(labels[:, :-1][scored[:, :-1]], ids[:, 1:][scored[:, :-1]])
    assert (docs[:, :-1] == docs[:, 1:])[scored[:, :-1]].all()  # never the next document's
    assert not scored[docs == PAD_DOCUMENT].any()
    assert objective.padding_fraction() < 0.05
    rows = objective.train_rows
    for r in range(len(rows)):  # every document whole, in one row
        assert sum(rows.spans[i][1] for i in rows.rows[r]) <= 64
    assert sorted(i for row in rows.rows for i in row) == list(range(len(rows.spans)))


def test_packed_evaluation_equals_each_document_alone(tmp_path) -> None:
    """The loss of packed held-out rows is the sum of each document's loss in a row of its
    own: evaluation packs, and packing changes nothing a document sees."""
    objective = packed_objective(tmp_path, CausalLM)
    model = build(**GPT2, vocab_size=260)
    n = objective.eval_examples(4)
    batch = objective.eval_batch(torch.arange(n))
    with torch.no_grad():
        packed = batch_loss(model, batch, torch.device("cpu"))
        alone = 0.0
        for r in range(n):
            for i in objective.eval_rows.rows[r]:
                start, length = objective.eval_rows.spans[i]
                doc = objective.eval_rows.tokens[start : start + length].long()[None]
                if length > 1:
                    single = {"input_ids": doc[:, :-1], "labels": doc[:, 1:]}
                    alone = alone + batch_loss(model, single, torch.device("cpu"))
    assert packed == pytest.approx(float(alone), rel=1e-5)


@pytest.mark.parametrize("family", ["decoder", "encoder", "seq2seq"])
def test_zoo_train_pack_learns(tmp_path, family: str) -> None:
    name, sets = {"decoder": DECODER, "encoder": ENCODER, "seq2seq": SEQ2SEQ}[family]
    write_jsonl(tmp_path / "c.jsonl", docs=300)
    cfg = config(tmp_path, tmp_path / "c.jsonl", pack=True, steps=12, eval_every=6)
    result = train(name, cfg, sets)
    losses = [h["loss"] for h in result["history"]]
    evals = [h["eval_loss"] for h in result["history"] if "eval_loss" in h]
    assert sum(losses[-3:]) / 3 < losses[0] - 0.5 and evals[1] < evals[0]
    assert result["padding_fraction"] < 0.05


def test_pack_with_tsv_pairs_is_refused(tmp_path) -> None:
    (tmp_path / "p.tsv").write_text("a b\tb a\n" * 20, encoding="utf-8")
    cfg = config(tmp_path, tmp_path / "p.tsv", pack=True)
    with pytest.raises(ValueError, match="--pack packs the documents of text or JSONL files"):
        train(SEQ2SEQ[0], cfg, SEQ2SEQ[1])


def test_zoo_compare_pack_with_muon(tmp_path) -> None:
    """`zoo compare` takes --pack and --optimizer (the options it shares with zoo train)."""
    write_jsonl(tmp_path / "c.jsonl")
    args = ["compare", "gpt2", "--data", str(tmp_path / "c.jsonl"), "--pack", "--steps", "2"]
    args += ["--optimizer", "muon"]
    args += ["--seq-len", "32", "--no-progress", "--no-plot", "--out", str(tmp_path / "cmp")]
    for key, value in {**SMALL, "dropout": 0.0}.items():
        args += ["--set", f"{key}={value}"]
    done = CliRunner().invoke(main, args)
    assert done.exit_code == 0, done.output
    report = json.loads((tmp_path / "cmp/results.json").read_text())
    assert report["config"]["pack"] is True and report["config"]["optimizer"] == "muon"
    run = Path(report["specs"][0]["runs"][0]["out"])
    saved = json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])
    assert "eval_loss" in saved


def test_zoo_train_pack_reports_the_padding(tmp_path) -> None:
    write_jsonl(tmp_path / "c.jsonl")
    args = ["train", "gpt2", "--data", str(tmp_path / "c.jsonl"), "--pack", "--steps", "2"]
    args += ["--seq-len", "32", "--no-progress", "--out", str(tmp_path / "run")]
    for key, value in {**SMALL, "dropout": 0.0}.items():
        args += ["--set", f"{key}={value}"]
    done = CliRunner().invoke(main, args)
    assert done.exit_code == 0, done.output
    padding = float(re.search(r"packed rows ([\d.]+)% padding", done.output).group(1))
    assert 0.0 <= padding < 5.0


def test_span_conv_on_a_packed_row_equals_each_document_alone() -> None:
    """ConvBERT's convolution heads: a tap in another document reads zeros, as a tap past the
    end of a row does, so each packed document gets the states it gets as a row of its own."""
    model = build(
        family="encoder",
        attention={"kind": "span_conv", "conv_kernel_size": 5},
        position="none",
    )
    g = torch.Generator().manual_seed(6)
    parts = [torch.randint(0, 50, (n,), generator=g) for n in (7, 9, 6)]
    ids, docs = packed_row(*parts)
    with torch.no_grad():
        packed = logits(model, ids, docs)[0]
        alone = torch.cat([logits(model, p[None], None)[0] for p in parts])
    assert (packed - alone).abs().max().item() <= 1e-5
