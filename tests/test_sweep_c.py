"""Text types the coverage sweep found unexamined (issue 33): Molmo2's text model, OpenAI's
Privacy Filter and Lara Mini.

Each from a tiny perturbed transformers model with a padded row: outputs within 1e-4 of
transformers, the same parameter count, cached decoding equal to transformers', an export
that transformers loads with equal outputs. (Every registered type's export round trip:
tests/test_export.py; the zoo specs' counts: tests/test_zoo_counts.py.)"""

from __future__ import annotations

import json
import shutil

import pytest
import torch
import transformers as hf
from hf_util import (
    assert_causal_lm_equal,
    assert_greedy_equal,
    assert_left_padded_equal,
    max_diff_unpadded,
    padded_batch,
    perturb,
    save_hf,
)
from transformers import DynamicCache
from transformers.models.molmo2 import Molmo2TextConfig, Molmo2TextModel

import archzoo
from archzoo.parts.converter import ConversionError

V = 96
MOLMO2 = dict(
    vocab_size=V,
    additional_vocab_size=8,
    hidden_size=32,
    intermediate_size=48,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=8,
    max_position_embeddings=64,
    pad_token_id=0,
)
# qk_norm_type x norm_after: a QK norm per head before each sublayer (Molmo2-8B's), and one
# over all heads after each sublayer (OLMo 2's layout)
MOLMO2_LAYOUTS = [("qwen3", False), ("olmo", True)]


def tiny_molmo2(qk: str = "qwen3", after: bool = False, **extra) -> Molmo2TextModel:
    torch.manual_seed(0)
    model = Molmo2TextModel(Molmo2TextConfig(**MOLMO2, qk_norm_type=qk, norm_after=after, **extra))
    perturb(model)
    return model.eval()


@pytest.mark.parametrize(("qk", "after"), MOLMO2_LAYOUTS)
def test_molmo2_text_outputs_equal_transformers(tmp_path, qk, after):
    ref = tiny_molmo2(qk, after)
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "hf")).eval()
    assert ours.spec.data["vocab_size"] == V + 8  # both token tables, joined
    assert ours.spec.data["block"]["kind"] == ("res_post_ln" if after else "pre_ln")
    ids, mask = padded_batch(V + 8)  # the extra rows read too
    with torch.no_grad():
        want = ref(input_ids=ids, attention_mask=mask).last_hidden_state
        got = ours(ids, attention_mask=mask).last_hidden_state
    assert max_diff_unpadded(got, want, mask) <= 1e-4
    assert ours.num_parameters() == sum(p.numel() for p in ref.parameters())


def test_molmo2_text_cached_decoding_equals_transformers(tmp_path):
    """transformers has no LM class for molmo2_text: its cached forward is compared instead,
    a prompt (one row left-padded) then one token at a time."""
    ref = tiny_molmo2()
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "hf")).eval()
    g = torch.Generator().manual_seed(5)
    ids = torch.randint(3, V, (2, 9), generator=g)
    mask = torch.ones_like(ids)
    mask[1, :3] = 0  # left padding
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    prompt = 5
    theirs, cache = DynamicCache(config=ref.config), ours.new_cache(2, ids.shape[1])
    with torch.no_grad():
        for start, end in [(0, prompt), *((t, t + 1) for t in range(prompt, ids.shape[1]))]:
            step = dict(attention_mask=mask[:, :end], position_ids=pos[:, start:end])
            want = ref(input_ids=ids[:, start:end], cache=theirs, use_cache=True, **step)
            got = ours(ids[:, start:end], cache=cache, **step)
            keep = mask[:, start:end]
            assert max_diff_unpadded(got.last_hidden_state, want.last_hidden_state, keep) <= 1e-4


@pytest.mark.parametrize(("qk", "after"), MOLMO2_LAYOUTS)
def test_molmo2_text_export_loads_in_transformers(tmp_path, qk, after):
    ref = tiny_molmo2(qk, after)
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "hf"))
    report = archzoo.to_hf(ours, tmp_path / "out")
    assert (report["model_type"], report["architecture"]) == ("molmo2_text", "Molmo2TextModel")
    back = Molmo2TextModel.from_pretrained(tmp_path / "out").eval()
    assert back.config.qk_norm_type == qk and back.config.norm_after is after
    ids, mask = padded_batch(V + 8)
    with torch.no_grad():
        want = ref(input_ids=ids, attention_mask=mask).last_hidden_state
        got = back(input_ids=ids, attention_mask=mask).last_hidden_state
    assert max_diff_unpadded(got, want, mask) <= 1e-5
    shutil.rmtree(tmp_path / "hf")


def test_molmo2_text_rope_scaled_on_some_layers_is_refused(tmp_path):
    yarn = {"rope_type": "linear", "rope_theta": 10000.0, "factor": 2.0}
    ref = tiny_molmo2(rope_parameters=yarn, rope_scaling_layers=[1])
    with pytest.raises(ConversionError) as err:
        archzoo.from_hf(save_hf(ref, tmp_path / "hf"))
    assert str(err.value).endswith(
        "config.json rope_scaling_layers=[1]: RoPE scaled on some layers only (a per-layer "
        "choice between a scaled and an unscaled rotary) is not supported"
    )


# ------------------------------------------------------------------ OpenAI's Privacy Filter

PRIVACY = dict(  # windows of 3 keys either side over 12 tokens; YaRN as the default's
    vocab_size=V,
    hidden_size=32,
    intermediate_size=16,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=8,
    sliding_window=3,
    num_local_experts=4,
    num_experts_per_tok=2,
    max_position_embeddings=64,
    pad_token_id=0,
    eos_token_id=0,
    num_labels=5,
    rope_parameters={"rope_type": "yarn", "rope_theta": 150000.0, "factor": 4.0}
    | {"beta_fast": 32.0, "beta_slow": 1.0, "truncate": False}
    | {"original_max_position_embeddings": 16},
)


def tiny_privacy_filter(task: str) -> torch.nn.Module:
    torch.manual_seed(0)
    model = getattr(hf, f"OpenAIPrivacyFilter{task}")(hf.OpenAIPrivacyFilterConfig(**PRIVACY))
    perturb(model, scale=0.1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("sinks"):  # make the sinks take a real share
                p.normal_(0.0, 1.0)
    return model.eval()


def privacy_output(out) -> torch.Tensor:
    return out.logits if getattr(out, "logits", None) is not None else out.last_hidden_state


@pytest.mark.parametrize("task", ["ForTokenClassification", "Model"])
def test_privacy_filter_outputs_equal_transformers(tmp_path, task):
    ref = tiny_privacy_filter(task)
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "hf")).eval()
    attention = ours.spec.data["attention"]
    assert (ours.family, attention["kind"], attention["window"]) == ("encoder", "local", 4)
    assert ours.spec.data["position"]["interleaved"] is True
    ids, mask = padded_batch(V, length=12)
    with torch.no_grad():
        want = privacy_output(ref(input_ids=ids, attention_mask=mask))
        got = privacy_output(ours(ids, attention_mask=mask))
    assert got.shape == want.shape
    assert max_diff_unpadded(got, want, mask) <= 1e-4
    assert ours.num_parameters() == sum(p.numel() for p in ref.parameters())


def test_privacy_filter_export_loads_in_transformers(tmp_path):
    ref = tiny_privacy_filter("ForTokenClassification")
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "hf"))
    report = archzoo.to_hf(ours, tmp_path / "out")
    assert report["architecture"] == "OpenAIPrivacyFilterForTokenClassification"
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config["sliding_window"] == 3 and "layer_types" not in config
    back = hf.OpenAIPrivacyFilterForTokenClassification.from_pretrained(tmp_path / "out").eval()
    ids, mask = padded_batch(V, length=12)
    with torch.no_grad():
        want = ref(input_ids=ids, attention_mask=mask).logits
        got = back(input_ids=ids, attention_mask=mask).logits
    assert max_diff_unpadded(got, want, mask) <= 1e-5


def test_privacy_filter_with_layer_types_is_refused(tmp_path):
    directory = save_hf(tiny_privacy_filter("Model"), tmp_path / "hf")
    path = directory / "config.json"
    config = json.loads(path.read_text())
    path.write_text(json.dumps({**config, "layer_types": ["full_attention"] * 2}))
    with pytest.raises(ConversionError) as err:
        archzoo.from_hf(directory)
    assert str(err.value).endswith(
        "config.json layer_types: the Privacy Filter windows every layer; per-layer attention "
        "types are not part of this type"
    )


# ------------------------------------------------------------------ Lara Mini

LARA = dict(  # its released period-5 pattern: DeltaNet, window, DeltaNet, NoPE, window
    vocab_size=V,
    hidden_size=32,
    num_hidden_layers=5,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=8,
    sliding_window=3,
    linear_num_key_heads=2,
    linear_num_value_heads=4,
    linear_key_head_dim=8,
    linear_value_head_dim=6,
    moe_intermediate_size=16,
    shared_expert_intermediate_size=24,
    num_experts=4,
    num_experts_per_tok=2,
    max_position_embeddings=64,
    pad_token_id=0,
    eos_token_id=2,
)


def tiny_lara(task: str) -> torch.nn.Module:
    torch.manual_seed(0)
    model = getattr(hf, f"LaraMini{task}")(hf.LaraMiniConfig(**LARA))
    perturb(model)
    return model.eval()


def test_lara_mini_causal_lm_equals_transformers(tmp_path):
    """Logits with a right- and a left-padded row, and greedy tokens through the cache
    (recurrent states, a windowed and a full key/value cache)."""
    ref = tiny_lara("ForCausalLM")
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "hf")).eval()
    kinds = [ours.spec.data["attention"]["kind"]] + [
        (layer["select"], layer["attention"]["kind"]) for layer in ours.spec.data["layers"]
    ]
    assert kinds == ["gated_deltanet", ([1, 4], "local"), ([3], "mha")]
    assert ours.spec.data["layers"][1]["attention"]["use_position"] is False  # NoPE
    assert_causal_lm_equal(ref, ours)
    assert_left_padded_equal(ref, ours)
    assert_greedy_equal(ref, ours)
    assert ours.num_parameters() == sum(p.numel() for p in ref.parameters())


def test_lara_mini_headless_equals_transformers(tmp_path):
    ref = tiny_lara("Model")
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "hf")).eval()
    ids, mask = padded_batch(V)
    with torch.no_grad():
        want = ref(input_ids=ids, attention_mask=mask).last_hidden_state
        got = ours(ids, attention_mask=mask).last_hidden_state
    assert max_diff_unpadded(got, want, mask) <= 1e-4
    assert ours.num_parameters() == sum(p.numel() for p in ref.parameters())


def test_lara_mini_export_keeps_the_checkpoint_layout(tmp_path):
    """The export writes the fused in_proj and out_norm transformers saves, and loads there."""
    ref = tiny_lara("ForCausalLM")
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "hf"))
    archzoo.to_hf(ours, tmp_path / "out")
    from safetensors import safe_open

    with safe_open(tmp_path / "out" / "model.safetensors", "pt") as f:
        names = set(f.keys())
    with safe_open(tmp_path / "hf" / "model.safetensors", "pt") as f:
        assert names == set(f.keys())
    back = hf.LaraMiniForCausalLM.from_pretrained(tmp_path / "out").eval()
    assert back.config.layer_types == ref.config.layer_types
    ids, mask = padded_batch(V)
    with torch.no_grad():
        want = ref(input_ids=ids, attention_mask=mask).logits
        got = back(input_ids=ids, attention_mask=mask).logits
    assert max_diff_unpadded(got, want, mask) <= 1e-5
