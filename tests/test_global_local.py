"""PEGASUS-X's global-local attention and the global tokens the embedding places first:
the pattern against the paper's blocks built by hand, every kernel against transformers'
encoder, and the stack's handling of the leading vectors."""

from __future__ import annotations

import warnings

import pytest
import torch
from hf_util import padded_batch, save_hf
from test_long_tail_encoders import V, tiny_generative

import archzoo
from archzoo.plugins.attention.global_local import GlobalLocalPattern
from archzoo.plugins.attention.sparse import pattern_keep


def hand_built_keep(n_global: int, T: int, size: int, stagger: bool) -> torch.Tensor:
    """(G + T, G + T) by PEGASUS-X's recipe: pad the tokens by half a block on each side
    when staggering, cut the row into blocks of `size`; globals see and are seen by all."""
    keep = torch.zeros(n_global + T, n_global + T, dtype=torch.bool)
    keep[:n_global, :] = True
    keep[:, :n_global] = True
    pad = size // 2 if stagger else 0
    for i in range(T):
        for j in range(T):
            keep[n_global + i, n_global + j] = (i + pad) // size == (j + pad) // size
    return keep


@pytest.mark.parametrize("stagger", [False, True])
def test_pattern_is_the_papers_staggered_blocks_with_global_tokens(stagger):
    G, T, size = 3, 13, 4
    got = pattern_keep(
        GlobalLocalPattern(G, size, stagger, 4), G + T, G + T, causal=False, key_padding=None
    )[0]
    assert torch.equal(got, hand_built_keep(G, T, size, stagger))


@pytest.mark.parametrize("impl", ["auto", "blocked", "flex", "sdpa", "math"])
def test_every_kernel_gives_transformers_encoder_states(tmp_path, impl):
    ref = tiny_generative("pegasus_x", "Model")
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "pegasus_x")).set_attention_impl(impl)
    ids, mask = padded_batch(V, length=11, real=6)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # flex without compile: the unfused fallback
        want = ref.get_encoder()(input_ids=ids, attention_mask=mask).last_hidden_state
        got = ours.encoder(ids, attention_mask=mask)
    assert got.shape == want.shape  # the global tokens are dropped from the output
    keep = mask.bool()
    assert (got - want).abs()[keep].max().item() <= 1e-5


def test_every_token_sees_the_global_tokens(tmp_path):
    ref = tiny_generative("pegasus_x", "Model")
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "pegasus_x"))
    ids, mask = padded_batch(V, length=11, real=6)
    with torch.no_grad():
        states = ours.encoder(ids, attention_mask=mask)
        table = ours.encoder.embedding.global_table.weight
        table.add_(torch.randn(table.shape, generator=torch.Generator().manual_seed(0)))
        moved = ours.encoder(ids, attention_mask=mask)
    assert (states - moved).abs().amax(-1).min().item() > 1e-3  # each token sees the globals


def test_global_tokens_in_a_causal_stack_are_refused_naming_the_embedding():
    with pytest.raises(ValueError, match="places 2 vectors before the tokens"):
        archzoo.build_model(
            "gpt2",
            overrides={"n_layers": 1, "d_model": 32, "n_heads": 2, "embedding.global_tokens": 2},
        )
