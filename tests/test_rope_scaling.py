"""RoPE scaling against transformers' own RoPE initialisation and rotary embedding, value for value."""

from __future__ import annotations

import pytest
import torch
import transformers as hf
from hf_util import V, max_diff_unpadded, padded_batch, perturb, save_hf
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

import archzoo
from archzoo.plugins.converters.common import rope_parameters
from archzoo.plugins.position.rope_scaling import scaled_inv_freq

HEAD_DIM = 16
MAX_LEN = 64

# one HF rope_parameters dict per scaling type (rope_theta added below)
SCALINGS = {
    "linear": {"rope_type": "linear", "factor": 4.0},
    "dynamic": {"rope_type": "dynamic", "factor": 2.0},
    "yarn": {
        "rope_type": "yarn",
        "factor": 4.0,
        "original_max_position_embeddings": 16,
        "beta_fast": 16.0,
        "beta_slow": 2.0,
    },
    "yarn_mscale": {
        "rope_type": "yarn",
        "factor": 8.0,
        "original_max_position_embeddings": 8,
        "mscale": 0.707,
        "mscale_all_dim": 1.0,
    },
    "llama3": {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 16,
    },
    "longrope": {
        "rope_type": "longrope",
        "short_factor": [1.0 + 0.1 * i for i in range(HEAD_DIM // 2)],
        "long_factor": [1.5 + 0.7 * i for i in range(HEAD_DIM // 2)],
        "original_max_position_embeddings": 16,
    },
}


def hf_config(case: str, **extra) -> hf.LlamaConfig:
    params = {**SCALINGS[case], "rope_theta": 500.0}
    return hf.LlamaConfig(
        hidden_size=HEAD_DIM * 2,
        num_attention_heads=2,
        num_key_value_heads=1,
        intermediate_size=48,
        num_hidden_layers=2,
        vocab_size=V,
        max_position_embeddings=MAX_LEN,
        rope_parameters=params,
        **extra,
    )


def our_rotary(config: hf.LlamaConfig):
    """archzoo's rotary component for an HF config, through the llama converter's mapping."""
    spec = {
        "family": "decoder",
        "vocab_size": V,
        "d_model": config.hidden_size,
        "n_heads": config.num_attention_heads,
        "n_layers": 1,
        "max_len": config.max_position_embeddings,
        "position": {"kind": "rotary", **rope_parameters(config.to_dict())},
        "attention": {"kind": "mha", "n_kv_heads": 1},
        "block": "pre_ln",
        "norm": "rmsnorm",
    }
    return archzoo.build_model(spec).decoder.position


@pytest.mark.parametrize("case", sorted(SCALINGS))
@pytest.mark.parametrize("seq_len", [10, MAX_LEN, 3 * MAX_LEN])
def test_inverse_frequencies_and_scaling_equal_transformers(case, seq_len):
    config = hf_config(case)
    rope_type = SCALINGS[case]["rope_type"]
    want_freq, want_factor = ROPE_INIT_FUNCTIONS[rope_type](config, "cpu", seq_len=seq_len)
    pos = our_rotary(config)
    positions = torch.arange(seq_len)[None]  # a forward whose longest position is seq_len - 1
    got_freq, got_factor = scaled_inv_freq(pos.cfg, pos.rot_dim, pos.dims.max_len, positions)
    torch.testing.assert_close(got_freq, want_freq.float(), rtol=1e-6, atol=0)
    assert got_factor == pytest.approx(want_factor, rel=1e-12)


@pytest.mark.parametrize("case", sorted(SCALINGS))
@pytest.mark.parametrize("length", [12, 100])
def test_cos_sin_equal_llama_rotary_embedding(case, length):
    """The whole rotary state, including dynamic/longrope's length switch and the cos/sin factor."""
    config = hf_config(case)
    ref = LlamaRotaryEmbedding(config)
    positions = torch.arange(length)[None].expand(2, length)
    x = torch.zeros(2, length, HEAD_DIM)
    cos_ref, sin_ref = ref(x, positions)  # (B, T, hd): the two halves repeat the frequencies
    pos = our_rotary(config)
    cos, sin = pos.prepare(positions, positions)  # (B, 1, T, hd/2)
    torch.testing.assert_close(cos[:, 0], cos_ref[..., : HEAD_DIM // 2], rtol=0, atol=2e-6)
    torch.testing.assert_close(sin[:, 0], sin_ref[..., : HEAD_DIM // 2], rtol=0, atol=2e-6)


def test_unknown_rope_type_is_refused():
    from archzoo.parts.converter import ConversionError

    with pytest.raises(ConversionError, match="rope type 'mystery' is not supported"):
        rope_parameters({"rope_parameters": {"rope_type": "mystery", "rope_theta": 1.0}})


def test_missing_scaling_parameters_are_located():
    spec = {
        "family": "decoder",
        "vocab_size": V,
        "d_model": 32,
        "n_heads": 2,
        "n_layers": 1,
        "position": {"kind": "rotary", "scaling": "longrope", "short_factor": [1.0]},
    }
    with pytest.raises(archzoo.SpecError) as err:
        archzoo.load_spec(spec)
    text = str(err.value)
    assert "original_max_len" in text and "needs" in text
    assert "short_factor" in text and "needs 8 values" in text


def llama32_checkpoint(tmp_path, case: str):
    """A tiny Llama-3.2-shaped checkpoint (tied embeddings, GQA) with the given rope scaling."""
    torch.manual_seed(0)
    config = hf_config(case, tie_word_embeddings=True, attn_implementation="eager")
    model = hf.LlamaForCausalLM(config)
    perturb(model)
    return model.eval(), save_hf(model, tmp_path / case)


@pytest.mark.parametrize("case", sorted(SCALINGS))
def test_scaled_llama_imports_with_logit_parity(tmp_path, case):
    ref, directory = llama32_checkpoint(tmp_path, case)
    ours = archzoo.from_hf(directory)
    # longer than original_max_position_embeddings, so yarn/llama3/longrope are all exercised
    ids, mask = padded_batch(V, length=24, real=20)
    with torch.no_grad():
        want = ref(input_ids=ids, attention_mask=mask).logits
        got = ours(ids, attention_mask=mask).logits
    assert max_diff_unpadded(got, want, mask) <= 1e-4


@pytest.mark.parametrize("case", ["llama3", "dynamic", "longrope"])
def test_scaled_llama_greedy_generation_matches_transformers(tmp_path, case):
    """Decoding crosses original_max_len (longrope switch) and max_len (dynamic growth)."""
    config_len = {"dynamic": 16, "longrope": MAX_LEN, "llama3": MAX_LEN}[case]
    torch.manual_seed(0)
    config = hf_config(case, tie_word_embeddings=True, attn_implementation="eager")
    config.max_position_embeddings = config_len
    ref = hf.LlamaForCausalLM(config)
    perturb(ref)
    ref.eval()
    ours = archzoo.from_hf(save_hf(ref, tmp_path / case))
    prompt = torch.randint(3, V, (1, 10), generator=torch.Generator().manual_seed(2))
    kwargs = {"max_new_tokens": 20, "do_sample": False, "pad_token_id": 0}
    want = ref.generate(prompt, **kwargs)
    got = ours.generate(prompt, **kwargs)
    assert got.tolist() == want.tolist()


def test_llama32_zoo_spec_equals_the_converted_published_config():
    from test_zoo_counts import LLAMA32_1B

    from archzoo.plugins.converters.llama import LlamaConverter

    converted = archzoo.load_spec(LlamaConverter().to_spec(hf.LlamaConfig(**LLAMA32_1B).to_dict()))
    zoo = archzoo.load_spec("llama3.2-1b")
    assert converted.data["position"] == zoo.data["position"]
    assert zoo.data["position"]["scaling"] == "llama3"
    for key in ("vocab_size", "d_model", "n_layers", "n_heads", "head_dim", "d_ff", "max_len"):
        assert converted.data[key] == zoo.data[key], key
