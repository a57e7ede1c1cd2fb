"""Converter tables: every transform inverts, and every type round-trips through its table."""

from __future__ import annotations

import pytest
import torch
from hf_util import perturb, save_hf, tiny_hf

import archzoo
from archzoo.parts.converter import ConversionError, TensorSource, parse_fields, spec_parts
from archzoo.parts.hf_tensors import ZooNames, parse_rules
from archzoo.parts.hf_transforms import (
    Flatten,
    Fuse,
    HeadsInterleaved,
    OffsetRows,
    Reversed,
    RotaryInterleaved,
    RowsDeinterleaved,
    Transpose,
    named,
)
from archzoo.plugins.converters import paths
from archzoo.plugins.converters.common import PATHS

CTX = {"n_heads": 4, "d_model": 32}
g = torch.Generator().manual_seed(0)


def rand(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=g)


# transform, HF-side example tensors (shapes as a real checkpoint has them)
TRANSFORMS = {
    "transpose": (Transpose(), [rand(32, 96)]),
    "transpose-vector": (Transpose(), [rand(96)]),
    "fuse": (Fuse(3), [rand(32, 32), rand(32, 32), rand(32, 32)]),
    "fuse-bias": (Fuse(3), [rand(32), rand(32), rand(32)]),
    "split": (Reversed(Fuse(3)), [rand(96, 32)]),
    "heads_interleaved": (HeadsInterleaved(), [rand(96, 32)]),
    "heads_interleaved-bias": (HeadsInterleaved(), [rand(96)]),
    "rotary_interleaved": (RotaryInterleaved(), [rand(32, 32)]),
    "flatten": (Flatten(), [rand(1, 50)]),
    "rows_deinterleaved": (RowsDeinterleaved(), [rand(96, 32)]),
    "rows_deinterleaved-bias": (RowsDeinterleaved(), [rand(96)]),
}


@pytest.mark.parametrize("name", sorted(TRANSFORMS))
def test_forward_then_inverse_is_the_identity(name):
    transform, hf = TRANSFORMS[name]
    zoo = transform.forward(hf, CTX)
    assert len(zoo) == transform.n_zoo
    back = transform.inverse(zoo, CTX)
    assert len(back) == len(hf) == transform.n_hf
    for a, b in zip(back, hf, strict=True):
        assert torch.equal(a, b)
    again = transform.forward(back, CTX)  # and inverse-then-forward on the archzoo side
    for a, b in zip(again, zoo, strict=True):
        assert torch.equal(a, b)


def test_transforms_give_the_archzoo_layout():
    """Each forward against a layout built by hand (so the identity above is not vacuous)."""
    q, k, v = rand(8, 4), rand(8, 4), rand(8, 4)
    assert torch.equal(Fuse(3).forward([q, k, v], {})[0], torch.cat([q, k, v]))
    # per head [h: q|k|v] with 2 heads of 4 rows -> [q | k | v]
    per_head = torch.cat([q[:4], k[:4], v[:4], q[4:], k[4:], v[4:]])
    assert torch.equal(
        HeadsInterleaved().forward([per_head], {"n_heads": 2})[0], Fuse().forward([q, k, v], {})[0]
    )
    # one head of 4 rows: pairs (r0, r1), (r2, r3) -> halves (r0, r2 | r1, r3)
    rows = rand(4, 3)
    got = RotaryInterleaved().forward([rows], {"head_dim": 4})[0]
    assert torch.equal(got, rows[[0, 2, 1, 3]])
    w = rand(5, 7)
    assert torch.equal(Transpose().forward([w], {})[0], w.t())


def test_offset_rows_drop_unused_rows_and_restore_them_as_zeros():
    table = torch.cat([torch.zeros(2, 4), rand(6, 4)])
    t = OffsetRows(2)
    assert torch.equal(t.forward([table], {})[0], table[2:])
    assert torch.equal(t.inverse(t.forward([table], {}), {})[0], table)


def test_unknown_transform_and_path_name_the_table_line():
    with pytest.raises(ValueError, match="unknown transform 'rotate'"):
        named("rotate", 1, 1)
    with pytest.raises(ValueError, match=r"line 2 'h.\{i\}.ln_1  ATTN_NROM'.*ATTN_NROM"):
        parse_rules("\nh.{i}.ln_1  ATTN_NROM\n", PATHS)
    with pytest.raises(ValueError, match="no values map 'ACT'"):
        parse_fields("hidden_act  ffn.activation  gelu  ACT")


def test_text_tables_parse_into_rules_and_fields():
    (w, b) = parse_rules("h.{i}.attn.(q,k,v)  QKV  fuse  # a comment", PATHS)
    assert w.hf == ("h.{i}.attn.q.weight", "h.{i}.attn.k.weight", "h.{i}.attn.v.weight")
    assert w.zoo == (paths.QKV + ".weight",) and b.zoo == (paths.QKV + ".bias",)
    pair = parse_rules("m.(q,o)  Q,ATTN_OUT  transpose", PATHS)
    assert [(r.hf, r.zoo) for r in pair][:2] == [
        (("m.q.weight",), (paths.Q + ".weight",)),
        (("m.o.weight",), (paths.ATTN_OUT + ".weight",)),
    ]
    (f,) = parse_fields("n_embd|hidden_size  d_model,head.width  1e-5")
    assert (f.hf, f.paths, f.default) == ("n_embd|hidden_size", ("d_model", "head.width"), 1e-5)
    assert spec_parts("block: pre_ln, norm: layernorm", "attention: {kind: mha}") == {
        "block": "pre_ln",
        "norm": "layernorm",
        "attention": {"kind": "mha"},
    }


def test_every_named_path_exists_in_a_built_model():
    """paths.py names archzoo's parameters once: each must be a real module or tensor."""
    models = [
        archzoo.build_model(name, overrides=over, device="meta")
        for name, over in [
            ("bert-base", {"n_layers": 1}),
            ("albert-base", {"n_layers": 1}),
            ("t5-small", {"n_layers": 1}),
            ("llama2-7b", {"n_layers": 1}),
            ("bart-base", {"n_layers": 1}),
            ("t5-small", {"n_layers": 1, "position": {"per_layer": True}}),  # UMT5
            (  # BERT's relative_key: a distance table per layer
                "bert-base",
                {"n_layers": 1, "position": {"kind": "relative", "per_layer": True}},
            ),
            ("qwen3-0.6b", {"n_layers": 1}),
            (
                "qwen3-30b-a3b",
                {"n_layers": 1, "ffn.n_shared": 1, "ffn.shared_gate": True},
            ),
            ("gpt-oss-20b", {"n_layers": 1, "layers": []}),
            ("deepseek-v3", {"n_layers": 1, "layers": []}),  # block 0 MoE
            ("long-t5-tglobal-base", {"n_layers": 1}),  # summary norm and table
            ("prophetnet-large-uncased", {"n_layers": 1}),  # predicting streams' tables
            ("bert-base", {"n_layers": 1, "head": {"kind": "classifier"}}),
            ("bert-base", {"n_layers": 1, "embedding.task_types": 3}),  # ERNIE's table
            ("gpt2", {"n_layers": 1, "head": "question_answering"}),
            ("gemma2-2b", {"n_layers": 1}),
            (
                "t5gemma-2b-2b",
                {"n_layers": 1, "layers": [], "decoder.layers": []},
            ),  # cross_out_norm
            ("electra-base-discriminator", {"n_layers": 1}),
            (
                "modernbert-base",
                {"n_layers": 1, "head": {"kind": "classifier", "pooler_norm": True}},
            ),
            ("longformer-base", {"n_layers": 1}),  # global_projections
            ("xlm-mlm-en-2048", {"n_layers": 1, "embedding.n_langs": 2}),
            ("deberta-v3-base", {"n_layers": 1}),  # the relative table's norm
            ("deberta-base", {"n_layers": 1, "position.absolute": True}),  # v1's tensors
            ("lfm2-350m", {"n_layers": 1, "layers": []}),  # a short_conv mixer
            ("mamba-codestral-7b", {"n_layers": 1}),  # a mamba2 mixer
            ("jamba-v0.1", {"n_layers": 1, "layers": []}),  # a mamba mixer with its norms
            ("qwen3-next-80b-a3b", {"n_layers": 1, "layers": []}),  # a gated_deltanet mixer
            ("minimax-text-01", {"n_layers": 1, "layers": []}),  # a lightning mixer
            ("apertus-8b", {"n_layers": 1}),  # xielu's scalars and constants
            ("diffllama-1.2b", {"n_layers": 1}),  # diff_mha's lambda vectors
            ("mobilebert-uncased", {"n_layers": 1}),  # bottleneck block, mlm extension
            ("jetmoe-8b", {"n_layers": 1}),  # moa's experts and the moe ffn's output bias
            ("bitnet-b1.58-2b-4t", {"n_layers": 1}),  # mha out_norm, glu inner_norm
            (  # X-MOD's language adapters with a norm of their own
                "xmod-base",
                {"n_layers": 1, "block.adapter_norm": "own"},
            ),
            ("kimi-linear-48b-a3b", {"n_layers": 1, "layers": []}),  # a kimi_delta mixer
            ("convbert-base", {"n_layers": 1}),  # span_conv's convolution heads
            ("clip-vit-base-patch32-text", {"n_layers": 1}),  # sentence_embedding projection
            ("a.x-k1", {"n_layers": 1, "layers": []}),  # moe output_norm
            ("ultrabert-6.7b", {"n_layers": 1, "layers": []}),  # mlm bottleneck's dense_out
            ("funnel-small", {"n_layers": 1, "layers": []}),  # pooled_relative's terms
            (  # PEGASUS-X's global tokens and their attention norm
                "pegasus-x-large",
                {"n_layers": 1, "encoder.layers": [], "decoder.n_layers": 1},
            ),
            (  # OPT-350m's layout: project_in / project_out around a narrower table
                "opt-125m",
                {"n_layers": 1, "embedding": {"kind": "factorized", "positions": "after"}},
            ),
        ]
    ]
    names = set()
    for m in models:
        for n in m.state_dict():
            parts = n.split(".")
            names.update(".".join(parts[:k]) for k in range(1, len(parts) + 1))
    for key, template in PATHS.items():
        found = {
            template.replace("{s}", s).replace("{i}", "0").rstrip(".")
            for s in ("encoder", "decoder")
        } & names
        assert found, f"paths.{key} = {template!r} is in no built model"


# every supported type, as its tiny HF model (the tests of test_hf_import.py use these too)
TYPES = {
    "gpt2": lambda: tiny_hf("gpt2"),
    "gpt2-untied": lambda: tiny_hf("gpt2", tie_word_embeddings=False),
    "bert": lambda: tiny_hf("bert"),
    "bert-untied": lambda: tiny_hf("bert", tie_word_embeddings=False),
    "roberta": lambda: tiny_hf("roberta"),
    "llama": lambda: tiny_hf("llama"),
    "bloom": lambda: tiny_hf("bloom"),
    "gpt_neox": lambda: tiny_hf("gpt_neox", rotary_pct=0.5),
    "t5": lambda: tiny_hf("t5"),
    "t5-gated": lambda: tiny_hf("t5", feed_forward_proj="gated-gelu", tie_word_embeddings=False),
    "bart": lambda: tiny_hf("bart"),
}


def _albert():
    import transformers as hf

    config = hf.AlbertConfig(
        vocab_size=96,
        embedding_size=16,
        hidden_size=32,
        num_hidden_layers=4,
        num_hidden_groups=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    return hf.AlbertForMaskedLM(config)


def _gpt_neo():
    import transformers as hf

    config = hf.GPTNeoConfig(
        vocab_size=96,
        hidden_size=32,
        num_layers=2,
        num_heads=4,
        max_position_embeddings=64,
        attention_types=[[["global", "local"], 1]],
        window_size=4,
    )
    return hf.GPTNeoForCausalLM(config)


TYPES.update({"albert": _albert, "gpt_neo": _gpt_neo})


@pytest.mark.parametrize("name", sorted(TYPES))
def test_round_trip_archzoo_to_hf_names_and_back(tmp_path, name):
    from safetensors.torch import load_file

    hf_model = TYPES[name]()
    perturb(hf_model)
    directory = save_hf(hf_model, tmp_path / "hf")
    ref = load_file(directory / "model.safetensors")  # the layout on disk, as export writes it
    ours = archzoo.from_hf(directory)
    conv = archzoo.get_registry().converter(hf_model.config.model_type)
    names, state, ctx = ZooNames.of(ours), ours.state_dict(), ours.spec.data

    exported = conv.export_state(state, names, ctx)  # archzoo -> HF names
    # untied BERT in transformers 5 keeps `cls.predictions.bias`, which forward never uses
    unused = {"cls.predictions.bias"} if name == "bert-untied" else set()
    for key, t in exported.items():
        if key in unused:
            continue  # a name the file lacks is another spelling of a tensor
        assert (
            torch.equal(t, ref[key]) if key in ref else any(torch.equal(t, r) for r in ref.values())
        ), key
    for key in set(ref) - set(exported) - unused:  # only tied copies are left out
        assert any(torch.equal(ref[key], t) for t in exported.values()), key

    src = TensorSource(dict(exported), "exported")  # HF names -> archzoo
    back = conv.import_state(src, hf_model.config.to_dict(), names, ctx)
    src.check_complete()
    assert set(back) == set(names.canonical)
    for key in names.canonical:
        assert torch.equal(back[key], state[key]), key


def test_a_table_missing_an_archzoo_tensor_names_it(tmp_path):
    from archzoo.plugins.converters.gpt2 import GPT2Converter

    class NoFinalNorm(GPT2Converter):
        tensors = type(GPT2Converter.tensors)(
            tuple(r for r in GPT2Converter.tensors.rules if "final_norm" not in r.zoo[0]),
            GPT2Converter.tensors.prefixes,
        )

    ours = archzoo.from_hf(save_hf(tiny_hf("gpt2"), tmp_path / "hf"))
    names = ZooNames.of(ours)
    src = TensorSource(GPT2Converter().export_state(ours.state_dict(), names, {}), "dir")
    with pytest.raises(ConversionError, match="maps no HF tensor to archzoo decoder.final_norm"):
        NoFinalNorm().import_state(src, {}, names, {})
