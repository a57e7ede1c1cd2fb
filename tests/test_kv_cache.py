"""The kv_cache capability is enforced: every attention that declares it decodes with the cache
exactly as without it, and one that does not is refused a cache and generates uncached."""

from __future__ import annotations

import pytest
import torch
from conftest import WORDS, tiny

import archzoo

TINY = tiny(family="decoder", head={"kind": "lm", "tie": False})
# Small patterns, so that over a 30-token sequence every sparse attention skips keys.
SMALL: dict[str, dict] = {
    "local": {"window": 5, "block": 4},
    "strided": {"stride": 4, "block": 4},
    "fixed": {"stride": 6, "summary": 2, "block": 4},
    "block_sparse": {"block": 4, "local_blocks": 1, "global_blocks": 1},
    "longformer": {"window": 6, "global_tokens": [0]},
    "bigbird": {"block": 4, "window_blocks": 1, "global_blocks": 1, "random_blocks": 1},
    "side_by_side": {  # Falcon-H1's parallel layer: keys/values and a state side by side
        "mixers": [{"kind": "mamba2", "head_dim": 16, "state_size": 8, "chunk_size": 4}, "mha"],
        "input_scales": [1.2, 0.9],
        "output_scales": [0.8, 1.1],
    },
}
PROMPT, NEW = 9, 21


def caching_attentions() -> list[str]:
    """Every registered attention that declares kv_cache=True and can run causally."""
    return sorted(
        c.name
        for c in archzoo.list_components("attention")
        if c.capabilities.kv_cache and c.capabilities.causal
    )


def tiny_decoder(attention: str, **extra: object) -> archzoo.ZooModel:
    torch.manual_seed(0)
    spec = {**TINY, "attention": {"kind": attention, **SMALL.get(attention, {})}, **extra}
    return archzoo.build_model(spec).eval()


def prompt() -> tuple[torch.Tensor, torch.Tensor]:
    """Two rows, the second left-padded by 3."""
    ids = torch.randint(
        1, TINY["vocab_size"], (2, PROMPT), generator=torch.Generator().manual_seed(1)
    )
    mask = torch.ones_like(ids)
    mask[1, :3] = 0
    return ids, mask


def test_the_sweep_covers_the_built_in_caching_attentions():
    assert {"mha", "local", "strided", "fixed", "block_sparse", "longformer"} <= set(
        caching_attentions()
    )


@pytest.mark.parametrize("attention", caching_attentions())
def test_cached_decoding_equals_full_recomputation(attention):
    model = tiny_decoder(attention)
    ids, mask = prompt()
    kwargs = {"attention_mask": mask, "max_new_tokens": NEW, "min_new_tokens": NEW}
    cached = model.generate(ids, use_cache=True, **kwargs)
    assert torch.equal(cached, model.generate(ids, use_cache=False, **kwargs))
    # logits of every new token: one cached step at a time vs the whole sequence at once
    full_mask = torch.cat([mask, mask.new_ones(2, NEW)], dim=1)
    pos = (full_mask.cumsum(-1) - 1).clamp(min=0)
    cache = model.new_cache(2, PROMPT + NEW)
    with torch.no_grad():
        full = model(cached, attention_mask=full_mask, position_ids=pos).logits
        steps = [model(ids, attention_mask=mask, position_ids=pos[:, :PROMPT], cache=cache).logits]
        for t in range(PROMPT, PROMPT + NEW - 1):
            out = model(
                cached[:, t : t + 1],
                attention_mask=full_mask[:, : t + 1],
                position_ids=pos[:, t : t + 1],
                cache=cache,
            )
            steps.append(out.logits)
    stepped = torch.cat(steps, dim=1)
    keep = full_mask[:, : PROMPT + NEW - 1].bool()
    assert (stepped - full[:, :-1]).abs()[keep].max() <= 1e-5


def test_an_attention_without_kv_cache_is_refused_a_cache():
    model = tiny_decoder("bigbird")
    assert not model.supports_cache()
    with pytest.raises(ValueError, match=r"layer 0: attention 'bigbird' cannot use a KV cache"):
        model.new_cache(1, 16)
    with pytest.raises(ValueError, match="'bigbird' cannot use a KV cache"):
        model.generate(prompt()[0], use_cache=True, max_new_tokens=2)


def test_an_attention_without_kv_cache_generates_through_the_fallback():
    model = tiny_decoder("bigbird")
    ids, mask = prompt()
    got = model.generate(ids, attention_mask=mask, max_new_tokens=NEW, min_new_tokens=NEW)
    assert got.shape == (2, PROMPT + NEW)
    # the fallback re-runs the whole prefix each step (BigBird's pattern depends on its
    # length): each new token is the argmax of a forward over everything before it
    full_mask = torch.cat([mask, mask.new_ones(2, NEW)], dim=1)
    pos = (full_mask.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        for t in range(PROMPT, PROMPT + NEW):
            out = model(got[:, :t], attention_mask=full_mask[:, :t], position_ids=pos[:, :t])
            assert torch.equal(out.logits[:, -1].argmax(-1), got[:, t])


def test_generation_needs_a_head_that_generates():
    model = tiny_decoder("mha", head="none")
    with pytest.raises(ValueError, match="head 'none' does not score the next token"):
        model.generate(prompt()[0], max_new_tokens=2)


def test_zoo_generate_prints_text_through_the_fallback(tokenizer_dir):
    """`zoo generate` on a model whose attention cannot cache: text, never a traceback."""
    from click.testing import CliRunner

    from archzoo.cli.main import main

    directory, tok = tokenizer_dir
    model = tiny_decoder("bigbird", vocab_size=len(WORDS))
    path = directory / "bigbird.safetensors"
    archzoo.save(model, path)
    result = CliRunner().invoke(
        main, ["generate", str(path), "--prompt", "w1 w2 w3 w4 w5", "--max-new-tokens", "6"]
    )
    assert result.exit_code == 0, (result.output, result.exception)
    ids = torch.tensor([tok.encode("w1 w2 w3 w4 w5").ids])
    expected = archzoo.load(path).generate(ids, max_new_tokens=6)
    assert expected.shape == (1, 11)
    assert result.output == tok.decode(expected[0].tolist()) + "\n"
