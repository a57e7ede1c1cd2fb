"""GPT-Neo and Mistral import with HF's logits while the window is shorter than the sequence;
gpt-neo-125m and mistral-7b count the parameters of their transformers classes (on meta)."""

from __future__ import annotations

import pytest
import torch
from hf_util import max_diff_unpadded, padded_batch, perturb, save_hf

import archzoo

hf = pytest.importorskip("transformers")

V, LENGTH, WINDOW = 96, 24, 5


def gpt_neo() -> torch.nn.Module:
    cfg = hf.GPTNeoConfig(
        num_layers=3,
        hidden_size=32,
        num_heads=4,
        vocab_size=V,
        max_position_embeddings=64,
        attention_types=[[["global", "local"], 1], [["local"], 1]],
        window_size=WINDOW,
        bos_token_id=1,
        eos_token_id=2,
    )
    return hf.GPTNeoForCausalLM(cfg)


def mistral() -> torch.nn.Module:
    cfg = hf.MistralConfig(
        num_hidden_layers=2,
        hidden_size=32,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=64,
        vocab_size=V,
        max_position_embeddings=64,
        sliding_window=WINDOW,
    )
    return hf.MistralForCausalLM(cfg)


@pytest.mark.parametrize("make", [gpt_neo, mistral], ids=["gpt_neo", "mistral"])
def test_sliding_window_import_matches_hf(tmp_path, make):
    model = make()
    perturb(model)
    model.eval()
    ours = archzoo.from_hf(save_hf(model, tmp_path / "hf"))
    kinds = [ours.decoder.blocks[i].attention.name for i in ours.decoder.layer_map]
    assert kinds == (["mha", "local", "local"] if make is gpt_neo else ["local", "local"])
    ids, mask = padded_batch(V, length=LENGTH, real=15)
    labels = ids.masked_fill(mask == 0, -100)
    with torch.no_grad():
        ref = model(input_ids=ids, attention_mask=mask, labels=labels)
        got = ours(ids, attention_mask=mask, labels=labels)
        dense = model(input_ids=ids, attention_mask=mask)  # the window must matter
    assert max_diff_unpadded(ref.logits, got.logits, mask) <= 1e-4
    assert abs(ref.loss.item() - got.loss.item()) <= 1e-5
    assert ours.num_parameters() == sum(p.numel() for p in model.parameters())
    spec = ours.spec.to_dict()
    mha_keys = ("n_kv_heads", "fused_qkv", "bias", "out_bias", "scale")
    spec["attention"] = {"kind": "mha", **{k: spec["attention"][k] for k in mha_keys}}
    spec["layers"] = []
    wide = archzoo.build_model({k: v for k, v in spec.items() if k != "extends"})
    wide.load_state_dict(ours.state_dict())
    with torch.no_grad():
        no_window = wide.eval()(ids, attention_mask=mask).logits
    assert max_diff_unpadded(no_window, dense.logits, mask) > 1e-3


def meta_count(cls: type, cfg: object, exclude: str | None = None) -> int:
    """Parameters of a transformers model built on meta (tied ones once), minus `exclude`."""
    with torch.device("meta"):
        named = cls(cfg).named_parameters()
        return sum(p.numel() for n, p in named if exclude is None or exclude not in n)


def test_gpt_neo_125m_counts_as_transformers():
    model = archzoo.build_model("gpt-neo-125m", device="meta")
    cfg = hf.GPTNeoConfig(
        hidden_size=768,
        num_layers=12,
        num_heads=12,
        attention_types=[[["global", "local"], 6]],
        max_position_embeddings=2048,
        window_size=256,
    )
    assert model.num_parameters() == meta_count(hf.GPTNeoForCausalLM, cfg)
    kinds = [model.decoder.blocks[i].attention.name for i in model.decoder.layer_map]
    assert kinds == ["mha", "local"] * 6
    assert model.decoder.blocks[1].attention.cfg.window == 256


def test_mistral_7b_counts_as_transformers():
    model = archzoo.build_model("mistral-7b", device="meta")
    cfg = hf.MistralConfig()  # the defaults are Mistral 7B v0.1
    assert model.num_parameters() == meta_count(hf.MistralForCausalLM, cfg)
    attention = model.decoder.blocks[0].attention
    assert (attention.name, attention.cfg.window, attention.n_kv) == ("local", 4096, 8)


def test_bigbird_base_counts_as_transformers():
    """BigBirdForMaskedLM carries a pooler it never uses; the zoo's MLM model has none."""
    model = archzoo.build_model("bigbird-base", device="meta")
    hf_count = meta_count(hf.BigBirdForMaskedLM, hf.BigBirdConfig(), exclude="pooler")
    assert model.num_parameters() == hf_count


def test_longformer_base_counts_as_transformers():
    cfg = hf.LongformerConfig(
        vocab_size=50265,
        max_position_embeddings=4098,
        type_vocab_size=1,
        attention_window=512,
        pad_token_id=1,
    )
    model = archzoo.build_model("longformer-base", device="meta")
    assert model.num_parameters() == meta_count(hf.LongformerForMaskedLM, cfg)
