"""Generation on hybrid stacks: one cache holds keys/values for attention layers and a
recurrent state for mixer layers; cached decoding equals re-running the whole sequence."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import tiny

import archzoo

MIXERS = [
    {"kind": "gated_deltanet", "n_k_heads": 2, "n_v_heads": 4, "head_k_dim": 8, "chunk_size": 4},
    {"kind": "mamba2", "d_inner": 48, "head_dim": 12, "state_size": 8, "chunk_size": 4},
    {"kind": "short_conv"},
    {"kind": "mamba", "state_size": 4, "chunk_size": 4},
]
PROMPT, NEW = 9, 12


def hybrid(**extra) -> archzoo.ZooModel:
    """Five layers: the four mixers around one GQA attention layer (index 2), rotary."""
    torch.manual_seed(0)
    kinds = [MIXERS[0], MIXERS[1], {"kind": "mha", "n_kv_heads": 2}, MIXERS[2], MIXERS[3]]
    layers = [{"select": [i], "attention": a} for i, a in enumerate(kinds)]
    spec = {
        "name": "hybrid",
        "family": "decoder",
        **tiny(n_layers=5),
        "position": "rotary",
        "head": {"kind": "lm", "tie": True},
        "layers": layers,
        **extra,
    }
    return archzoo.build_model(spec).eval()


def prompt() -> tuple[torch.Tensor, torch.Tensor]:
    """Two rows, the second left-padded by 3."""
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(1, 50, (2, PROMPT), generator=g)
    mask = torch.ones_like(ids)
    mask[1, :3] = 0
    return ids, mask


def test_new_cache_holds_states_for_mixers_and_keys_for_attention() -> None:
    model = hybrid()
    cache = model.new_cache(2, 16)
    kinds = [type(layer).__name__ for layer in cache.layers]
    assert kinds == ["StateCache", "StateCache", "LayerCache", "StateCache", "StateCache"]
    gdn = cache.layers[0].tensors
    assert gdn["conv"].shape == (2, 2 * 16 + 4 * 8, 3)  # q, k: 2 heads of 8; v: 4 of 8
    assert gdn["ssm"].shape == (2, 4, 8, 8) and gdn["ssm"].dtype == torch.float32
    states = sum(
        t.numel() * t.element_size() for layer in cache.layers[:2] for t in layer.tensors.values()
    )
    states += sum(
        t.numel() * t.element_size() for layer in cache.layers[3:] for t in layer.tensors.values()
    )
    kv = 2 * 2 * 2 * 16 * 8 * 4  # k and v: 2 rows, 2 heads, 16 tokens, 8 wide, float32
    assert cache.memory_bytes() == states + kv


@pytest.mark.parametrize(
    "kwargs",
    [
        {},  # greedy
        {"do_sample": True, "temperature": 0.9, "top_k": 20},
        {"num_beams": 3},
    ],
    ids=["greedy", "sampling", "beams"],
)
def test_cached_generation_equals_recomputation(kwargs) -> None:
    """Greedy, sampled (same seed) and beam-searched tokens of a left-padded batch are the
    same with the cache (states reordered with the beams) as without it."""
    model = hybrid()
    ids, mask = prompt()
    common = {"attention_mask": mask, "max_new_tokens": NEW, "min_new_tokens": NEW, **kwargs}
    torch.manual_seed(3)
    cached = model.generate(ids, use_cache=True, **common)
    torch.manual_seed(3)
    full = model.generate(ids, use_cache=False, **common)
    assert cached.shape == (2, PROMPT + NEW)
    assert torch.equal(cached, full)


def test_padded_row_generates_what_it_generates_alone() -> None:
    """Left padding never reaches a state: the padded row's tokens equal its unpadded run."""
    model = hybrid()
    ids, mask = prompt()
    batch = model.generate(ids, attention_mask=mask, max_new_tokens=NEW, min_new_tokens=NEW)
    alone = model.generate(ids[1:, 3:], max_new_tokens=NEW, min_new_tokens=NEW)
    assert torch.equal(batch[1, PROMPT:], alone[0, PROMPT - 3 :])


def test_beam_reorder_moves_state_rows() -> None:
    model = hybrid()
    cache = model.new_cache(3, 8)
    with torch.no_grad():
        model(torch.randint(1, 50, (3, 5)), cache=cache)
    before = {k: t.clone() for k, t in cache.layers[1].tensors.items()}
    cache.reorder(torch.tensor([2, 2, 0]))
    for name, t in cache.layers[1].tensors.items():
        assert torch.equal(t, before[name][[2, 2, 0]]), name


def test_reset_forgets_the_states() -> None:
    model = hybrid()
    cache = model.new_cache(1, 8)
    ids = torch.randint(1, 50, (1, 5))
    with torch.no_grad():
        first = model(ids, cache=cache).logits
        cache.reset()
        again = model(ids, cache=cache).logits
    assert torch.equal(first, again)


def test_zoo_build_json_reports_state_bytes_per_layer(tmp_path) -> None:
    """Per layer: the recurrent state of one row in bytes (float32 SSM states, conv windows
    in the weights' dtype) next to the KV bytes per token of the attention layer."""
    import yaml
    from click.testing import CliRunner

    from archzoo.cli.main import main

    path = tmp_path / "hybrid.yaml"
    path.write_text(yaml.safe_dump(hybrid().spec.source_data()), encoding="utf-8")
    result = CliRunner().invoke(main, ["build", str(path), "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    conv = 4 * 3  # float32 weights, kernel - 1 tokens
    assert out["state_bytes_per_row"]["decoder"] == [
        (2 * 16 + 32) * conv + 4 * 8 * 8 * 4,  # gated_deltanet: conv window + 4 heads of 8x8
        (48 + 2 * 8) * conv + 4 * 8 * 12 * 4,  # mamba2: conv window + 4 heads of 8x12
        0,  # attention: keys and values per token instead
        32 * (4 * 2),  # short_conv: kernel 3 -> a 2-token window of d_model
        64 * conv + 64 * 4 * 4,  # mamba: d_inner 64, N = 4 per channel
    ]
    assert out["kv_cache_bytes_per_token"]["float32"] == 2 * 2 * 8 * 4  # one layer's k, v


def test_attention_probabilities_are_refused_naming_the_mixer_layer() -> None:
    """A mixer has no attention probabilities: output_attentions names its layer."""
    with pytest.raises(ValueError, match=r"attention 'gated_deltanet' \(layer 0\) does not report"):
        hybrid()(torch.randint(1, 50, (1, 5)), output_attentions=True)
