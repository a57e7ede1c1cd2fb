"""HF options archzoo used to refuse, each from a tiny perturbed checkpoint with a padded row
against transformers (logits within 1e-4, greedy tokens identical for decoders) and through
to_hf back into transformers: MPT's `expansion_ratio`, GPT-2's
`scale_attn_by_inverse_layer_idx` (and `reorder_and_upcast_attn`), Qwen2's
`use_sliding_window` from `max_window_layers`, Llama's `pretraining_tp`, and the exports
of StarCoder2 and of Phi-3 with LongRoPE."""

from __future__ import annotations

import json

import pytest
import torch
import transformers as hf
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
