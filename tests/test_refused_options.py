"""HF options archzoo used to refuse, each from a tiny perturbed checkpoint with a padded row
against transformers (logits within 1e-4, greedy tokens identical for decoders) and through
to_hf back into transformers: MPT's `expansion_ratio`, GPT-2's
`scale_attn_by_inverse_layer_idx` (and `reorder_and_upcast_attn`), Qwen2's
`use_sliding_window` from `max_window_layers`, Llama's `pretraining_tp`, BERT's
`relative_key` / `relative_key_query` distances (against transformers 4.57.1's stored
outputs: transformers 5 dropped them), and the exports of StarCoder2 and of Phi-3 with
LongRoPE."""

from __future__ import annotations

import json

import pytest
import torch
import transformers as hf
from bert4_relative import HIDDEN, fill
from hf_util import (
    assert_causal_lm_equal,
    assert_greedy_equal,
    max_diff_unpadded,
    padded_batch,
    perturb,
    save_hf,
)

import archzoo
from archzoo.hf.express import ExportError

V = 96


def make(prefix: str, suffix: str = "ForCausalLM", seed: int = 0, **config) -> torch.nn.Module:
    """A tiny transformers model `prefix + suffix`, its weights perturbed."""
    torch.manual_seed(seed)
    model = getattr(hf, prefix + suffix)(getattr(hf, prefix + "Config")(**config))
    perturb(model, scale=0.1)
    return model.eval()


def exported_logits_equal(ref: torch.nn.Module, ours, directory) -> dict:
    """to_hf, then transformers' from_pretrained of the export gives ref's logits (within
    1e-4 on the real tokens of a padded batch); returns the written config.json."""
    archzoo.to_hf(ours, directory)
    back, info = type(ref).from_pretrained(directory, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    assert not info["mismatched_keys"], info
    ids, mask = padded_batch(V)
    with torch.no_grad():
        want = ref(input_ids=ids, attention_mask=mask).logits
        got = back.eval()(input_ids=ids, attention_mask=mask).logits
    assert max_diff_unpadded(got, want, mask) <= 1e-4
    return json.loads((directory / "config.json").read_text())


def check_decoder(ref: torch.nn.Module, tmp_path) -> archzoo.ZooModel:
    """Import `ref`: logits and loss, greedy tokens, then the export round trip."""
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "hf"))
    assert_causal_lm_equal(ref, ours, vocab=V)
    assert_greedy_equal(ref, ours, vocab=V)
    exported_logits_equal(ref, ours, tmp_path / "out")
    return ours


# --- MPT: expansion_ratio ----------------------------------------------------------------

MPT = dict(vocab_size=V, d_model=32, n_layers=2, n_heads=4, max_seq_len=64, expansion_ratio=2)


@pytest.fixture
def mpt_reads_expansion_ratio(monkeypatch):
    """transformers 5.24's MptMLP is 4 x d_model wide whatever the config says; MosaicML's
    code, which trained these checkpoints, reads `expansion_ratio`: the oracle here is
    transformers' MPT with its MLP that wide."""
    from transformers.models.mpt import modeling_mpt

    plain = modeling_mpt.MptMLP.__init__

    def init(self, config):
        plain(self, config)
        width = int(config.expansion_ratio * config.hidden_size)
        self.up_proj = torch.nn.Linear(config.hidden_size, width, bias=False)
        self.down_proj = torch.nn.Linear(width, config.hidden_size, bias=False)

    monkeypatch.setattr(modeling_mpt.MptMLP, "__init__", init)


def test_mpt_expansion_ratio_sets_the_mlp_width(tmp_path, mpt_reads_expansion_ratio):
    ref = make("Mpt", **MPT)
    assert ref.transformer.blocks[0].ffn.up_proj.out_features == 64
    ours = check_decoder(ref, tmp_path)
    assert ours.spec.data["d_ff"] == 64
    written = json.loads((tmp_path / "out" / "config.json").read_text())
    assert written["expansion_ratio"] == 2


def test_mpt_expansion_ratio_export_is_refused_where_transformers_cannot_load_it(tmp_path):
    config = hf.MptConfig(**MPT).to_dict()
    spec = archzoo.get_registry().converter("mpt").to_spec(config)
    model = archzoo.build_model(spec)
    with pytest.raises(ExportError, match=r"mismatched keys: .*up_proj.*nothing was written"):
        archzoo.to_hf(model, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_mpt_fractional_expansion_ratio_is_refused_by_name():
    config = {**hf.MptConfig(**MPT).to_dict(), "expansion_ratio": 1.01}
    with pytest.raises(archzoo.ConversionError, match="expansion_ratio=1.01"):
        archzoo.get_registry().converter("mpt").to_spec(config)


# --- GPT-2: scale_attn_by_inverse_layer_idx, reorder_and_upcast_attn -----------------------

GPT2 = dict(vocab_size=V, n_embd=32, n_layer=3, n_head=4, n_positions=64, pad_token_id=0)


@pytest.mark.parametrize("scaled", [True, False], ids=["scaled", "unscaled"])
def test_gpt2_scores_divided_by_layer_index_plus_one(tmp_path, scaled):
    ref = make(
        "GPT2",
        "LMHeadModel",
        **GPT2,
        scale_attn_weights=scaled,
        scale_attn_by_inverse_layer_idx=True,
        reorder_and_upcast_attn=True,
        attn_implementation="eager",  # the path that reorders and upcasts
    )
    ours = check_decoder(ref, tmp_path)
    base = 8**-0.5 if scaled else 1.0
    layers = [c["attention"]["scale"] for c in ours.spec.layer_components("decoder")]
    assert layers == [None if scaled else 1.0, base / 2.0, base / 3.0]  # None: hd^-1/2
    written = json.loads((tmp_path / "out" / "config.json").read_text())
    assert written["scale_attn_by_inverse_layer_idx"] is True


# --- Qwen2: use_sliding_window from max_window_layers --------------------------------------

QWEN = dict(
    vocab_size=V,
    hidden_size=32,
    intermediate_size=48,
    num_hidden_layers=3,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
    pad_token_id=0,
)


@pytest.mark.parametrize("prefix", ["Qwen2", "Qwen3"])
def test_qwen_slides_a_window_from_max_window_layers_on(tmp_path, prefix):
    config = dict(QWEN, use_sliding_window=True, sliding_window=4, max_window_layers=1)
    ref = make(prefix, **config)
    assert ref.config.layer_types == ["full_attention", "sliding_attention", "sliding_attention"]
    ours = check_decoder(ref, tmp_path)
    kinds = [c["attention"]["kind"] for c in ours.spec.layer_components("decoder")]
    assert kinds == ["mha", "local", "local"]
    written = json.loads((tmp_path / "out" / "config.json").read_text())
    assert (written["use_sliding_window"], written["sliding_window"]) == (True, 4)
    assert written["max_window_layers"] == 1


MOE = dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16, mlp_only_layers=[1])


def test_qwen3_moe_slides_every_layer_and_qwen2_moe_the_even_ones(tmp_path):
    """transformers' own rules: Qwen3-MoE's window is every layer's (max_window_layers and
    layer_types unread), Qwen2-MoE's the even layers below max_window_layers."""
    window = dict(use_sliding_window=True, sliding_window=4, max_window_layers=3)
    moe3 = make("Qwen3Moe", **QWEN, **MOE, **window, head_dim=8)
    ours = check_decoder(moe3, tmp_path / "qwen3_moe")
    kinds = [c["attention"]["kind"] for c in ours.spec.layer_components("decoder")]
    assert kinds == ["local", "local", "local"]
    moe2 = make("Qwen2Moe", **QWEN, **MOE, **window, shared_expert_intermediate_size=24)
    assert moe2.config.layer_types == ["sliding_attention", "full_attention", "sliding_attention"]
    ours = check_decoder(moe2, tmp_path / "qwen2_moe")
    layers = ours.spec.layer_components("decoder")
    assert [c["attention"]["kind"] for c in layers] == ["local", "mha", "local"]
    assert [c["ffn"]["kind"] for c in layers] == ["moe", "glu", "moe"]  # mlp_only_layers kept
    written = json.loads((tmp_path / "qwen2_moe" / "out" / "config.json").read_text())
    assert written["max_window_layers"] == 3


def test_qwen_sliding_layers_without_use_sliding_window_are_refused():
    config = hf.Qwen2Config(**QWEN).to_dict()
    config["layer_types"] = ["full_attention", "sliding_attention", "full_attention"]
    with pytest.raises(archzoo.ConversionError, match="use_sliding_window is false"):
        archzoo.get_registry().converter("qwen2").to_spec(config)


# --- Llama: pretraining_tp -----------------------------------------------------------------


def test_llama_pretraining_tp_changes_nothing(tmp_path):
    """transformers 5 computes the full projections whatever pretraining_tp says."""
    config = dict(QWEN, num_hidden_layers=2, pretraining_tp=2)
    check_decoder(make("Llama", **config), tmp_path)


# --- BERT: relative_key, relative_key_query ------------------------------------------------

BERT = dict(
    vocab_size=V,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=64,
    max_position_embeddings=16,
)
HD, ROWS = 8, 2 * 16 - 1  # head width; distance rows: every i - j within max_len


def distance_terms(att, q, k, kind: str) -> torch.Tensor:
    """transformers 4's BertSelfAttention score terms, written out: rows i - j + max_len - 1
    of the layer's distance_embedding, q . r and (key_query) k . r, before the scale."""
    T = q.shape[2]
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    r = att.distance_embedding(i - j + 16 - 1)  # (Tq, Tk, hd)
    terms = torch.einsum("bhld,lrd->bhlr", q, r)
    if kind == "relative_key_query":
        terms = terms + torch.einsum("bhrd,lrd->bhlr", k, r)
    return terms


def with_distances(att, kind: str) -> None:
    """transformers 5's BERT self-attention plus transformers 4's distance terms (added to
    the additive mask its eager kernel adds to the scaled scores)."""
    plain = att.forward

    def forward(hidden_states, attention_mask=None, **kwargs):
        shape = (*hidden_states.shape[:-1], -1, HD)
        q = att.query(hidden_states).view(shape).transpose(1, 2)  # (B, H, T, hd)
        k = att.key(hidden_states).view(shape).transpose(1, 2)
        bias = distance_terms(att, q, k, kind) * att.scaling
        if attention_mask is not None and attention_mask.dtype == torch.bool:
            attention_mask = torch.zeros_like(bias).masked_fill(
                ~attention_mask, torch.finfo(bias.dtype).min
            )
        mask = bias if attention_mask is None else attention_mask + bias
        return plain(hidden_states, attention_mask=mask, **kwargs)

    att.forward = forward


def bert_relative(kind: str, suffix: str = "ForMaskedLM") -> torch.nn.Module:
    """A tiny BERT as transformers 4 ran `kind`: per-layer distance tables, no absolute
    positions added (their table is still saved, as transformers 4 saved it)."""
    ref = make("Bert", suffix, **BERT, attn_implementation="eager")
    ref.config.position_embedding_type = kind
    g = torch.Generator().manual_seed(5)
    base = getattr(ref, "bert", ref)
    for layer in base.encoder.layer:
        att = layer.attention.self
        att.distance_embedding = torch.nn.Embedding(ROWS, HD)
        with torch.no_grad():
            att.distance_embedding.weight.copy_(torch.randn(ROWS, HD, generator=g) * 0.3)
        with_distances(att, kind)
    base.embeddings.position_embeddings.forward = lambda ids: torch.zeros(*ids.shape, 32)
    return ref


def test_the_dense_distance_term_is_transformers_shaw_relative_key_term():
    """The q . r term above is transformers' own relative_key function (Wav2Vec2-BERT's,
    which indexes by j - i: the same table reversed) and archzoo's `relative` position."""
    from types import SimpleNamespace

    from transformers.models.wav2vec2_bert.modeling_wav2vec2_bert import (
        _apply_relative_key_position_encoding as shaw,
    )

    att = bert_relative("relative_key").bert.encoder.layer[0].attention.self
    g = torch.Generator().manual_seed(2)
    q, k = torch.randn(2, 4, 7, HD, generator=g), torch.randn(2, 4, 7, HD, generator=g)
    table = att.distance_embedding.weight.detach()
    module = SimpleNamespace(
        left_max_position_embeddings=15,
        right_max_position_embeddings=15,
        distance_embedding=torch.nn.Embedding.from_pretrained(table.flip(0)),
        scaling=HD**-0.5,
    )
    with torch.no_grad():
        want = distance_terms(att, q, k, "relative_key") * HD**-0.5
        _, theirs = shaw(module, q, k)
    assert torch.allclose(theirs, want, atol=1e-6)
    spec = dict(BERT_SPEC, position={"kind": "relative", "max_distance": 15, "per_layer": True})
    position = archzoo.build_model(spec).encoder.position
    with torch.no_grad():
        position.key_tables[0].weight.copy_(table.flip(0))
        steps = torch.arange(7)[None].expand(2, 7)
        state = position.layer_state(position.prepare(steps, steps), 0)
        ours = position.score_bias(state, q, k, HD**-0.5)
        assert torch.allclose(ours, want, atol=1e-6)
    spec["position"]["key_term"] = True
    keyed = archzoo.build_model(spec).encoder.position
    with torch.no_grad():
        keyed.key_tables[0].weight.copy_(table.flip(0))
        state = keyed.layer_state(keyed.prepare(steps, steps), 0)
        both = distance_terms(att, q, k, "relative_key_query") * HD**-0.5
        assert torch.allclose(keyed.score_bias(state, q, k, HD**-0.5), both, atol=1e-6)


BERT_SPEC = {
    "family": "encoder",
    "vocab_size": V,
    "d_model": 32,
    "n_layers": 2,
    "n_heads": 4,
    "d_ff": 64,
    "max_len": 16,
}


@pytest.mark.parametrize("kind", ["relative_key", "relative_key_query"])
def test_bert_relative_distances_give_transformers_4_logits(tmp_path, kind):
    ref = bert_relative(kind)
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "hf"))
    position = ours.spec.data["position"]
    assert position == {
        "kind": "relative",
        "max_distance": 15,
        "value_term": False,
        "per_layer": True,
        "key_term": kind == "relative_key_query",
    }
    ids, mask = padded_batch(V, length=12, real=7)
    with torch.no_grad():
        want = ref(input_ids=ids, attention_mask=mask).logits
        got = ours(ids, attention_mask=mask).logits
    assert max_diff_unpadded(got, want, mask) <= 1e-4


@pytest.mark.parametrize("kind", ["relative_key", "relative_key_query"])
def test_bert_relative_distances_give_transformers_4s_hidden_states(tmp_path, kind):
    """transformers 4.57.1's own BertModel outputs (tests/bert4_relative.py) for the same
    weights: archzoo's import and the oracle above both reproduce them."""
    ref = bert_relative(kind, "Model")
    fill(ref)
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "hf"))
    ids, mask = padded_batch(V, length=12, real=7)
    want = torch.tensor(HIDDEN[kind]).reshape(2, 12, 32)
    with torch.no_grad():
        got = ours(ids, attention_mask=mask).last_hidden_state
        dense = ref(input_ids=ids, attention_mask=mask).last_hidden_state
    assert max_diff_unpadded(got, want, mask) <= 1e-4
    assert max_diff_unpadded(dense, want, mask) <= 1e-4


def test_bert_relative_export_round_trips_through_the_table_and_transformers_refuses_it(
    tmp_path,
):
    """The table writes transformers 4's names and rows back (the distance rows reversed
    again), archzoo reads that export to the same logits; to_hf's check refuses it, since
    transformers 5 runs absolute positions whatever position_embedding_type says."""
    from safetensors.torch import load_file, save_file

    from archzoo.parts.hf_tensors import ZooNames

    ref = bert_relative("relative_key_query")
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "hf"))
    converter = archzoo.get_registry().converter("bert")
    back = converter.export_state(ours.state_dict(), ZooNames.of(ours), ours.spec.data)
    saved = load_file(str(tmp_path / "hf" / "model.safetensors"))
    unused = {"bert.embeddings.position_embeddings.weight", "cls.predictions.decoder.weight"}
    assert set(back) - {"cls.predictions.decoder.bias"} == set(saved) - unused  # bias: tied
    assert all(torch.equal(back[n], saved[n]) for n in back if n in saved)
    config = converter.hf_config(ours.spec.data, "ForMaskedLM")
    assert config["position_embedding_type"] == "relative_key_query"
    out = tmp_path / "table"
    out.mkdir()
    (out / "config.json").write_text(json.dumps({**config, "architectures": ["BertForMaskedLM"]}))
    save_file({k: v.clone() for k, v in back.items()}, str(out / "model.safetensors"))
    again = archzoo.from_hf(out)
    ids, mask = padded_batch(V, length=12, real=7)
    with torch.no_grad():
        assert torch.equal(
            again(ids, attention_mask=mask).logits, ours(ids, attention_mask=mask).logits
        )
    with pytest.raises(ExportError, match="nothing was written"):
        archzoo.to_hf(ours, tmp_path / "out")


def test_an_unknown_position_embedding_type_is_refused_by_name():
    config = hf.BertConfig(**BERT).to_dict()
    config["position_embedding_type"] = "rotary"
    with pytest.raises(archzoo.ConversionError, match="position_embedding_type='rotary'"):
        archzoo.get_registry().converter("bert").to_spec(config)
    config["position_embedding_type"] = "relative_key"
    with pytest.raises(archzoo.ConversionError, match="position_embedding_type='relative_key'"):
        archzoo.get_registry().converter("roberta").to_spec({**config, "model_type": "roberta"})


# --- exports that found no type: StarCoder2 (a sliding window), Phi-3 (LongRoPE) ------------


def test_starcoder2_with_a_sliding_window_exports_as_starcoder2(tmp_path):
    config = dict(QWEN, num_hidden_layers=2, sliding_window=4, bos_token_id=1, eos_token_id=2)
    check_decoder(make("Starcoder2", **config), tmp_path)
    written = json.loads((tmp_path / "out" / "config.json").read_text())
    assert (written["model_type"], written["sliding_window"]) == ("starcoder2", 4)


def test_phi3_with_longrope_exports_as_phi3(tmp_path):
    rope = {
        "rope_type": "longrope",
        "rope_theta": 10000.0,
        "partial_rotary_factor": 0.5,
        "short_factor": [1.0, 1.3],
        "long_factor": [2.0, 5.0],
    }
    config = dict(
        QWEN,
        num_hidden_layers=2,
        original_max_position_embeddings=16,
        partial_rotary_factor=0.5,
        rope_parameters=rope,
        sliding_window=6,
        bos_token_id=1,
        eos_token_id=2,
    )
    check_decoder(make("Phi3", **config), tmp_path)
    written = json.loads((tmp_path / "out" / "config.json").read_text())
    assert written["model_type"] == "phi3"
    assert written["original_max_position_embeddings"] == 16
    assert written["rope_parameters"]["long_factor"] == [2.0, 5.0]
