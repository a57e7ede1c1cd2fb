"""Packed rows (document_ids): attention stays inside each document, positions restart.

Oracles: the same document run alone in a row of its own (equal logits), the packed row
with another document 1 (doc 2 unchanged), autograd (no gradient crosses documents), and
the dense masked computation for the sparse paths.
"""

from __future__ import annotations

import pytest
import torch
from conftest import tiny
from test_sparse_attention import patterns

import archzoo
from archzoo.documents import document_positions, document_runs
from archzoo.masks import AttentionMask
from archzoo.plugins.attention.sparse import attend

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
    spec = {"family": family, "attention": {"kind": kind, **ATTENTIONS[kind]}}
    if kind == "disentangled":
        spec["position"] = {"kind": "deberta_relative", "max_distance": 8}
    if kind in ("block_local", "transient_global"):
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
