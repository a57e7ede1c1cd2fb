"""ALBERT: factorized embedding, `all`/`groups` sharing, zoo counts and HF parity."""

from __future__ import annotations

import pytest
import torch
import transformers as hf
from hf_util import max_diff_unpadded, padded_batch, perturb, save_hf

import archzoo
import archzoo.parts.interfaces
import archzoo.parts.masks
from archzoo import ConversionError, SpecError

V = 96
ALBERT_ZOO = ("albert-base", "albert-large", "albert-xlarge", "albert-xxlarge")


def tiny_albert(**kw: object) -> hf.AlbertForMaskedLM:
    cfg = {
        "vocab_size": V,
        "embedding_size": 16,
        "hidden_size": 32,
        "num_hidden_layers": 3,
        "num_attention_heads": 4,
        "intermediate_size": 64,
        "max_position_embeddings": 64,
        **kw,
    }
    return hf.AlbertForMaskedLM(hf.AlbertConfig(**cfg))


TINY = {
    "family": "encoder",
    "vocab_size": V,
    "d_model": 32,
    "n_layers": 12,
    "n_heads": 4,
    "d_ff": 64,
    "max_len": 64,
    "dropout": 0.0,
    "block": "post_ln",
    "embedding": {"kind": "factorized", "embedding_size": 16, "type_vocab_size": 2, "norm": True},
    "head": "mlm",
}


# ---------------------------------------------------------------- HF parity


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"num_hidden_groups": 3},
        {"num_hidden_layers": 4, "num_hidden_groups": 2, "hidden_act": "gelu"},
        {"tie_word_embeddings": False},
    ],
    ids=["one-group", "three-groups", "two-groups-gelu", "untied"],
)
def test_import_matches_hf_logits_and_loss(tmp_path, kw):
    model = tiny_albert(**kw)
    perturb(model)
    model.eval()
    ours = archzoo.from_hf(save_hf(model, tmp_path / "hf"))
    ids, mask = padded_batch(V)
    types = (torch.arange(ids.shape[1]) >= 4).long().expand_as(ids)  # two segments
    labels = ids.masked_fill(mask == 0, -100)
    with torch.no_grad():
        ref = model(input_ids=ids, attention_mask=mask, token_type_ids=types, labels=labels)
        got = ours(ids, attention_mask=mask, token_type_ids=types, labels=labels)
    assert max_diff_unpadded(ref.logits, got.logits, mask) <= 1e-4
    assert abs(ref.loss.item() - got.loss.item()) <= 1e-5
    hf_params = {id(p): p.numel() for p in model.parameters()}
    if not model.config.tie_word_embeddings:  # transformers 5 leaves predictions.bias unused
        del hf_params[id(model.predictions.bias)]
    assert ours.num_parameters() == sum(hf_params.values())
    groups = model.config.num_hidden_groups
    assert len(ours.encoder.blocks) == groups
    assert ours.spec.data["sharing"]["kind"] == ("all" if groups == 1 else "groups")


def test_import_then_save_and_load_gives_identical_logits(tmp_path):
    ours = archzoo.from_hf(save_hf(tiny_albert(num_hidden_groups=3), tmp_path / "hf"))
    archzoo.save(ours, tmp_path / "m.safetensors")
    again = archzoo.load(tmp_path / "m.safetensors").eval()
    assert again.spec == ours.spec
    ids, mask = padded_batch(V)
    with torch.no_grad():
        assert torch.equal(ours(ids, mask).logits, again(ids, mask).logits)


def test_pretraining_checkpoint_imports_without_its_order_head(tmp_path):
    model = hf.AlbertForPreTraining(tiny_albert().config)
    perturb(model)
    ours = archzoo.from_hf(save_hf(model.eval(), tmp_path / "hf"))
    ids, mask = padded_batch(V)
    with torch.no_grad():
        ref = model(input_ids=ids, attention_mask=mask).prediction_logits
        got = ours(ids, attention_mask=mask).logits
    assert max_diff_unpadded(ref, got, mask) <= 1e-4


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"inner_group_num": 2}, "inner_group_num=2 is not supported"),
        ({"num_hidden_groups": 2}, "num_hidden_groups=2 does not divide num_hidden_layers=3"),
    ],
)
def test_unsupported_configs_are_refused(tmp_path, kw, message):
    directory = save_hf(tiny_albert(**kw), tmp_path / "hf")
    with pytest.raises(ConversionError, match=message):
        archzoo.from_hf(directory)


# ---------------------------------------------------------------- zoo counts


def hf_albert_config(name: str) -> hf.AlbertConfig:
    """The HF configuration a zoo spec describes, read from the spec itself."""
    data = archzoo.load_spec(name).data
    return hf.AlbertConfig(
        vocab_size=data["vocab_size"],
        embedding_size=data["embedding"]["embedding_size"],
        hidden_size=data["d_model"],
        num_hidden_layers=data["n_layers"],
        num_attention_heads=data["n_heads"],
        intermediate_size=data["d_ff"],
        max_position_embeddings=data["max_len"],
        type_vocab_size=data["embedding"]["type_vocab_size"],
    )


@pytest.mark.parametrize("name", ALBERT_ZOO)
def test_zoo_parameter_count_equals_hf(name):
    with torch.device("meta"):
        ref = hf.AlbertForMaskedLM(hf_albert_config(name))
    expected = sum(p.numel() for p in ref.parameters())  # tied weights once
    assert archzoo.build_model(name, device="meta").num_parameters() == expected


@pytest.mark.parametrize("name", ALBERT_ZOO)
def test_zoo_spec_is_what_hf_converts_to(name):
    """The zoo spec and the converter's spec of the matching HF config build the same model."""
    config = hf_albert_config(name).to_dict()
    imported = archzoo.load_spec(archzoo.get_registry().converter("albert").to_spec(config))
    zoo = archzoo.load_spec(name).data
    for key in ("embedding", "position", "attention", "block", "norm", "ffn", "sharing", "head"):
        assert imported.data[key] == zoo[key], key
    for key in ("vocab_size", "d_model", "n_layers", "n_heads", "d_ff", "max_len", "dropout"):
        assert imported.data[key] == zoo[key], key


# ---------------------------------------------------------------- sharing


def test_all_sharing_has_one_layer_of_parameters_and_runs_it_n_times():
    one = archzoo.build_model({**TINY, "n_layers": 1, "sharing": "all"})
    twelve = archzoo.build_model({**TINY, "n_layers": 12, "sharing": "all"})
    unshared = archzoo.build_model({**TINY, "n_layers": 12})
    assert one.num_parameters() == twelve.num_parameters()
    assert len(twelve.encoder.blocks) == 1
    per_block = sum(p.numel() for p in twelve.encoder.blocks[0].parameters())
    assert unshared.num_parameters() - twelve.num_parameters() == 11 * per_block
    calls = []
    twelve.encoder.blocks[0].register_forward_hook(lambda *_: calls.append(1))
    twelve(torch.randint(0, V, (2, 5)))
    assert len(calls) == 12


def test_all_sharing_applies_the_same_block_repeatedly():
    """A 3-layer shared model equals its single block applied three times by hand."""
    torch.manual_seed(0)
    model = archzoo.build_model({**TINY, "n_layers": 3, "sharing": "all"}).eval()
    ids, mask = padded_batch(V)
    enc = model.encoder
    with torch.no_grad():
        got = model(ids, attention_mask=mask).last_hidden_state
        positions = torch.arange(ids.shape[1]).expand_as(ids)
        x = enc.embedding(ids, None, enc.position.embed(positions))
        ctx = archzoo.parts.interfaces.AttentionContext(
            archzoo.parts.masks.AttentionMask.build(10, 10, causal=False, key_padding=mask)
        )
        for _ in range(3):
            x = enc.blocks[0](x, ctx)
    assert max_diff_unpadded(got, x, mask) <= 1e-6


HF_CASES = [(12, 1), (12, 2), (12, 3), (12, 4), (12, 6), (12, 12), (24, 4), (6, 3), (1, 1)]


@pytest.mark.parametrize(("n_layers", "n_groups"), HF_CASES)
def test_groups_assignment_is_hf_albert(n_layers, n_groups):
    sharing = archzoo.get_registry().get("sharing", "groups")
    got = sharing(sharing.Config(n_groups=n_groups)).assign(n_layers)
    # transformers' AlbertTransformer.forward picks a group per layer with this expression.
    want = [int(i / (n_layers / n_groups)) for i in range(n_layers)]
    assert got == want
    assert sorted(set(got)) == list(range(n_groups))


def test_groups_build_one_block_per_group():
    model = archzoo.build_model(
        {**TINY, "n_layers": 6, "sharing": {"kind": "groups", "n_groups": 3}}
    )
    assert len(model.encoder.blocks) == 3
    assert model.encoder.layer_map == [0, 0, 1, 1, 2, 2]


def test_groups_that_do_not_divide_the_layers_are_a_spec_error():
    with pytest.raises(SpecError, match="sharing: n_groups 4 must divide n_layers 6"):
        archzoo.load_spec({**TINY, "n_layers": 6, "sharing": {"kind": "groups", "n_groups": 4}})


def test_shared_layers_with_different_components_are_refused():
    spec = {
        **TINY,
        "n_layers": 2,
        "sharing": "all",
        "layers": [{"select": [1], "ffn": {"kind": "mlp", "activation": "relu"}}],
    }
    with pytest.raises(SpecError, match="layer 1 shares parameters"):
        archzoo.load_spec(spec)


# ---------------------------------------------------------------- factorized embedding


def test_factorized_embedding_equals_manual_computation():
    torch.manual_seed(0)
    model = archzoo.build_model({**TINY, "n_layers": 1}).eval()
    emb, table = model.encoder.embedding, model.encoder.position.table.weight
    assert emb.word.weight.shape == (V, 16) and table.shape == (64, 16)
    assert emb.project.weight.shape == (32, 16)
    ids = torch.randint(0, V, (2, 7))
    types = torch.tensor([[0, 0, 0, 1, 1, 1, 1]] * 2)
    positions = torch.arange(7).expand(2, 7)
    with torch.no_grad():
        got = emb(ids, types, model.encoder.position.embed(positions))
        summed = emb.word.weight[ids] + table[positions] + emb.token_type.weight[types]
        normed = torch.nn.functional.layer_norm(
            summed, (16,), emb.norm.weight, emb.norm.bias, model.spec.data["norm"]["eps"]
        )
        want = normed @ emb.project.weight.T + emb.project.bias  # (B, T, d_model)
    assert got.shape == (2, 7, 32)
    assert torch.allclose(got, want, atol=1e-6)


def test_mlm_head_ties_to_the_factorized_table():
    model = archzoo.build_model({**TINY, "n_layers": 1}, device="meta")
    head = model.head
    assert head.decoder.weight is model.encoder.embedding.word.weight
    assert head.dense.weight.shape == (16, 32) and head.norm.weight.shape == (16,)


def test_sinusoidal_positions_are_checked_at_the_embedding_width():
    spec = {**TINY, "position": "sinusoidal"}
    spec["embedding"] = {**TINY["embedding"], "embedding_size": 15}
    with pytest.raises(SpecError, match="sinusoidal positions need an even d_model, got 15"):
        archzoo.load_spec(spec)
    spec["embedding"]["embedding_size"] = 16
    model = archzoo.build_model(spec)
    out = model(torch.randint(0, V, (1, 5)))
    assert out.logits.shape == (1, 5, V)
