"""The hybrid converters' per-layer kinds (`common.layer_types`): without `layer_types` each
family's older keys or default give the list transformers' config computes; a list of the
wrong length or with an unknown kind is refused with a message naming it. And the Mamba
converters' integer expand (`common.integer_expand`) on export."""

from __future__ import annotations

import pytest

from archzoo.parts.converter import ConversionError
from archzoo.plugins.converters import kimi_linear, lfm2, minimax, olmo_hybrid, qwen3_next
from archzoo.plugins.converters.common import layer_types

transformers = pytest.importorskip("transformers")

FALLBACKS = [
    (minimax, minimax.KINDS, "MiniMaxConfig", {"num_hidden_layers": 5}),
    (
        minimax,
        minimax.KINDS,
        "MiniMaxConfig",
        {"num_hidden_layers": 3, "attn_type_list": [1, 0, 0]},
    ),
    (kimi_linear, kimi_linear.KINDS, "KimiLinearConfig", {"num_hidden_layers": 6}),
    (
        kimi_linear,
        kimi_linear.KINDS,
        "KimiLinearConfig",
        {
            "num_hidden_layers": 4,
            "linear_attn_config": {"full_attn_layers": [2], "kda_layers": [1, 3, 4]},
        },
    ),
    (lfm2, lfm2.LAYER_TYPES, "Lfm2Config", {"num_hidden_layers": 4, "full_attn_idxs": [1, 3]}),
    (lfm2, lfm2.LAYER_TYPES, "Lfm2Config", {"num_hidden_layers": 3}),
]


@pytest.mark.parametrize(("module", "known", "cls", "keys"), FALLBACKS)
def test_fallback_equals_transformers(module, known, cls, keys) -> None:
    """A config.json without `layer_types`: the kinds transformers' config class derives."""
    n = keys["num_hidden_layers"]
    expected = getattr(transformers, cls)(**keys).layer_types
    if "attn_type_list" in keys:  # transformers 5 ignores it; the original checkpoint's meaning
        expected = ["full_attention", "linear_attention", "linear_attention"]
    assert layer_types(keys, n, known, module.default_kinds) == expected


@pytest.mark.parametrize(
    ("known", "fallback", "config", "message"),
    [
        (
            qwen3_next.LAYER_TYPES,
            None,
            {},
            "config.json layer_types=[]: expected one of ('linear_attention', 'full_attention') "
            "per layer (2 layers)",
        ),
        (
            olmo_hybrid.LAYER_TYPES,
            None,
            {"layer_types": ["full_attention", "mamba"]},
            "config.json layer_types=['full_attention', 'mamba']: expected one of "
            "('linear_attention', 'full_attention') per layer (2 layers)",
        ),
        (
            kimi_linear.KINDS,
            kimi_linear.default_kinds,
            {"linear_attn_config": {"full_attn_layers": [1], "kda_layers": []}},
            "config.json layer_types=['full_attention', None]: expected one of "
            "('linear_attention', 'full_attention') per layer (2 layers)",
        ),
        (
            lfm2.LAYER_TYPES,
            lfm2.default_kinds,
            {"layer_types": ["conv"]},
            "config.json layer_types=['conv']: expected one of ('conv', 'full_attention') "
            "per layer (2 layers)",
        ),
    ],
)
def test_refused_with_the_list(known, fallback, config, message) -> None:
    with pytest.raises(ConversionError) as err:
        layer_types(config, 2, known, fallback)
    assert str(err.value) == message


@pytest.mark.parametrize(
    ("converter", "message"),
    [
        ("MambaConverter", "MambaConfig has only an integer expand"),
        ("Mamba2Converter", "Mamba2Config has only an integer expand"),
    ],
)
def test_mamba_width_not_a_whole_expand_is_refused(converter, message) -> None:
    """Export writes expand = d_inner / d_model (`common.integer_expand`): 40 / 32 is refused."""
    from archzoo.plugins.converters import mamba, mamba2

    cls = getattr(mamba, converter, None) or getattr(mamba2, converter)
    spec = {"d_model": 32, "attention": {"d_inner": 40, "dt_rank": 2, "dt_min": 0.0}}
    with pytest.raises(ConversionError) as err:
        cls().adjust_config({}, spec)
    assert (
        str(err.value) == f"attention.d_inner 40 is not a whole multiple of d_model 32: {message}"
    )
