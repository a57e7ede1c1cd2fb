"""Decoders of the GPT branch (OPT, GPTBigCode, StarCoder2, GPT-J, CTRL, GPT-1) imported from tiny
random transformers checkpoints: logits, loss, greedy generation with the KV cache and the
headless base model's hidden states equal transformers'."""

from __future__ import annotations

import json

import pytest
import torch
import transformers as hf
from click.testing import CliRunner
from hf_util import (
    NO_LANGUAGE_ADAPTERS,
    V,
    assert_causal_lm_equal,
    assert_greedy_equal,
    max_diff_unpadded,
    padded_batch,
    perturb,
    save_hf,
    table_export,
)

import archzoo
from archzoo.cli.main import main
from archzoo.parts.converter import ConversionError

# case -> (HF class prefix, causal-LM suffix, config keyword arguments)
CASES: dict[str, tuple[str, str, dict]] = {
    "opt": (
        "OPT",
        "ForCausalLM",
        dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, ffn_dim=64),
    ),
    "opt_350m_layout": (  # post-LN, no final norm, 16-wide token table projected in and out
        "OPT",
        "ForCausalLM",
        dict(
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            ffn_dim=64,
            word_embed_proj_dim=16,
            do_layer_norm_before=False,
        ),
    ),
    "gpt_bigcode": (  # multi-query: one key/value head in the fused c_attn
        "GPTBigCode",
        "ForCausalLM",
        dict(n_embd=32, n_layer=2, n_head=4, n_positions=64, multi_query=True),
    ),
    "gpt_bigcode_mha": (  # one key/value head per query head: c_attn rows laid out per head
        "GPTBigCode",
        "ForCausalLM",
        dict(n_embd=32, n_layer=2, n_head=4, n_positions=64, multi_query=False),
    ),
    "starcoder2": (  # GQA, biases, a sliding window shorter than the prompts
        "Starcoder2",
        "ForCausalLM",
        dict(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            sliding_window=5,
        ),
    ),
    "gptj": (  # rotary on 4 of 8 features per head, pairwise; lm_head with a bias
        "GPTJ",
        "ForCausalLM",
        dict(n_embd=32, n_layer=2, n_head=4, n_positions=64, rotary_dim=4),
    ),
    "ctrl": (  # sqrt(d)-scaled embeddings, sines-then-cosines positions, tied head with a bias
        "CTRL",
        "LMHeadModel",
        dict(n_embd=32, n_layer=2, n_head=4, dff=64, n_positions=64),
    ),
    "openai_gpt": (  # GPT-1: post-LN, learned positions, tied head
        "OpenAIGPT",
        "LMHeadModel",
        dict(n_embd=32, n_layer=2, n_head=4, n_positions=64),
    ),
}
NO_BASE_MODEL = ("opt_350m_layout",)  # its base model: tested below


def make(case: str, suffix: str | None = None, **overrides) -> torch.nn.Module:
    """A perturbed tiny HF model of `case` (its causal LM unless `suffix` names another class)."""
    prefix, lm, sizes = CASES[case]
    positions = {} if "n_positions" in sizes else {"max_position_embeddings": 64}
    config = getattr(hf, prefix + "Config")(**{"vocab_size": V, **positions, **sizes, **overrides})
    torch.manual_seed(0)
    model = getattr(hf, prefix + (suffix or lm))(config)
    perturb(model, scale=0.1)
    return model.eval()


def imported(tmp_path, case: str, suffix: str | None = None, **overrides):
    ref = make(case, suffix, **overrides)
    return ref, archzoo.from_hf(save_hf(ref, tmp_path / case))


@pytest.mark.parametrize("case", sorted(CASES))
def test_logits_and_loss_equal_transformers(tmp_path, case):
    ref, ours = imported(tmp_path, case)
    assert_causal_lm_equal(ref, ours)
    assert ours.num_parameters() == sum(p.numel() for p in ref.parameters())


@pytest.mark.parametrize("case", sorted(CASES))
def test_greedy_generation_equals_transformers(tmp_path, case):
    ref, ours = imported(tmp_path, case)
    assert ours.supports_cache()
    assert_greedy_equal(ref, ours)


@pytest.mark.parametrize("case", sorted(c for c in CASES if c not in NO_BASE_MODEL))
def test_base_model_gives_hf_last_hidden_state(tmp_path, case):
    ref, ours = imported(tmp_path, case, "Model")
    assert ours.spec.data["head"]["kind"] == "none"
    ids, mask = padded_batch(V)
    with torch.no_grad():
        want = ref(input_ids=ids, attention_mask=mask).last_hidden_state
        got = ours(ids, attention_mask=mask).last_hidden_state
    assert max_diff_unpadded(got, want, mask) <= 1e-4
    assert ours.num_parameters() == sum(p.numel() for p in ref.parameters())


def test_opt_projected_table_base_model_and_refused_task_heads(tmp_path):
    """OPTModel of the 350m layout ends with project_out (hidden states E wide), as HF's;
    the task heads, which read those narrower states, are refused by name."""
    ref, ours = imported(tmp_path, "opt_350m_layout", "Model")
    assert ours.spec.data["head"] == {"kind": "none", "pooler": False, "project": 16}
    ids, mask = padded_batch(V)
    with torch.no_grad():
        want = ref(input_ids=ids, attention_mask=mask).last_hidden_state
        got = ours(ids, attention_mask=mask).last_hidden_state
    assert got.shape[-1] == 16 and max_diff_unpadded(got, want, mask) <= 1e-4
    assert ours.num_parameters() == sum(p.numel() for p in ref.parameters())
    ref = make("opt_350m_layout", "ForSequenceClassification")
    with pytest.raises(ConversionError, match="word_embed_proj_dim=16 != hidden_size=32"):
        archzoo.from_hf(save_hf(ref, tmp_path / "opt-cls"))


def test_opt_350m_layout_is_post_ln_with_a_projected_table(tmp_path):
    _, ours = imported(tmp_path, "opt_350m_layout")
    spec = ours.spec.data
    assert spec["block"] == {"kind": "post_ln", "zero_padded": False, **NO_LANGUAGE_ADAPTERS}
    assert ours.decoder.final_norm is None
    assert spec["embedding"]["kind"] == "factorized"
    assert tuple(ours.decoder.position.table.weight.shape) == (64 + 2, 32)  # d_model wide
    assert tuple(ours.head.down.weight.shape) == (16, 32)  # project_out


def test_zoo_import_of_each_type(tmp_path):
    for case in sorted(CASES):
        ref = make(case)
        directory = save_hf(ref, tmp_path / case)
        out = tmp_path / f"{case}.safetensors"
        result = CliRunner().invoke(main, ["import", str(directory), "--out", str(out), "--json"])
        assert result.exit_code == 0, result.output
        report = json.loads(result.output)
        assert report["family"] == "decoder"
        assert report["params"] == sum(p.numel() for p in ref.parameters())
        ids, mask = padded_batch(V)
        with torch.no_grad():
            got, want = archzoo.load(out)(ids).logits, ref(input_ids=ids).logits
        assert (got - want).abs().max().item() <= 1e-4, case


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_table_exports_the_checkpoint_tensors(tmp_path, case):
    """The same table maps back: archzoo tensors under HF names equal the saved ones."""
    from safetensors.torch import load_file

    ref, ours = imported(tmp_path, case)
    back = table_export(ref, ours)
    saved = load_file(str(tmp_path / case / "model.safetensors"))
    assert set(saved) <= set(back)
    for key, value in saved.items():
        assert torch.equal(back[key], value), (case, key)


def test_starcoder2_window_is_shorter_than_the_sequence_and_matters(tmp_path):
    ref, ours = imported(tmp_path, "starcoder2")
    assert ours.spec.data["attention"]["kind"] == "local"
    assert ours.spec.data["attention"]["window"] == 5
    ref.config.sliding_window = None  # transformers without the window: other logits
    ids, _ = padded_batch(V)
    with torch.no_grad():
        full = ref(input_ids=ids).logits
        got = ours(ids).logits
    assert (got[:, :5] - full[:, :5]).abs().max().item() <= 1e-4  # inside the window: same
    assert (got[:, 5:] - full[:, 5:]).abs().max().item() > 1e-3


def test_openai_gpt_classifier_and_ignored_n_inner_follow_transformers(tmp_path):
    """OpenAIGPTForSequenceClassification scores the last real token; transformers' GPT-1
    MLP is 4 x n_embd whatever a config's n_inner says, and so is the import's."""
    ref, ours = imported(
        tmp_path, "openai_gpt", "ForSequenceClassification", num_labels=3, pad_token_id=0
    )
    ids, mask = padded_batch(V)
    ids = ids.masked_fill(mask == 0, 0)
    labels = torch.tensor([0, 2])
    with torch.no_grad():
        want = ref(input_ids=ids, attention_mask=mask, labels=labels)
        got = ours(ids, attention_mask=mask, labels=labels)
    assert (want.logits - got.logits).abs().max().item() <= 1e-4
    assert abs(want.loss.item() - got.loss.item()) <= 1e-5
    ref, ours = imported(tmp_path / "wide", "openai_gpt", n_inner=48)
    assert ours.spec.data["d_ff"] == 4 * 32
    assert ours.num_parameters() == sum(p.numel() for p in ref.parameters())
