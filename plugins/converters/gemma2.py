"""Gemma 2: Gemma with a norm before and after each sublayer (sandwich), soft-capped attention
scores and final logits, a `query_pre_attn_scalar`^-1/2 score scale, and sliding-window
layers (`layer_types`, every other one by default) between global ones."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import ConversionError, Field, spec_parts
from archzoo.specs.plan import layer_components, stack_config

from .common import TASK_LM, decoder_tasks, table, tie
from .common import task as make_task
from .gemma import GemmaConverter
from .llama import MLP_TENSORS, ROTARY_BUFFER

SANDWICH_TENSORS = """
        embed_tokens                            WORD
        layers.{i}.input_layernorm              ATTN_NORM
        layers.{i}.self_attn.(q_proj,k_proj,v_proj,o_proj)      Q,K,V,ATTN_OUT
        layers.{i}.post_attention_layernorm     ATTN_OUT_NORM
        layers.{i}.pre_feedforward_layernorm    FFN_NORM
        layers.{i}.post_feedforward_layernorm   FFN_OUT_NORM
        norm                                    FINAL_NORM
"""
FINAL_SOFTCAP = Field("final_logit_softcapping", "head.softcap", None)


def capped_lm_task() -> Any:
    """A tied causal-LM head whose logits are soft-capped by `final_logit_softcapping`."""
    return make_task("kind: lm", TASK_LM, fields=(tie(True), FINAL_SOFTCAP))


def layer_slice(indices: list[int], n: int) -> list[int] | str:
    """Evenly spaced layer indices as 'start:stop:step' (stop n when they run to the end)."""
    steps = {b - a for a, b in zip(indices, indices[1:], strict=False)}
    if len(indices) < 2 or len(steps) != 1:
        return indices
    step = steps.pop()
    stop = n if indices[-1] + step >= n else indices[-1] + 1
    return f"{indices[0]}:{stop}:{step}"


def sliding_layers(
    spec: dict[str, Any],
    config: dict[str, Any],
    default_every: int,
    local_position: dict[str, Any] | None = None,
    *,
    global_positions: bool = True,
) -> None:
    """`layer_types` (else every `default_every`-th layer global) as `layers:` entries: the
    sliding layers attend `local`ly over `sliding_window` keys (and rotate by
    `local_position` when given); without `global_positions` the global layers see no
    positions (NoPE). The group that is an even slice of layers goes in the entry (the
    sliding layers when both are); the other keeps the stack's components."""
    n = spec["n_layers"]
    kinds = config.get("layer_types") or [
        "full_attention" if (i + 1) % default_every == 0 else "sliding_attention" for i in range(n)
    ]
    unknown = set(kinds) - {"sliding_attention", "full_attention"}
    if unknown or len(kinds) != n:
        raise ConversionError(
            f"config.json layer_types={kinds!r}: expected {n} entries of "
            "'sliding_attention' / 'full_attention'"
        )
    sliding = [i for i, kind in enumerate(kinds) if kind == "sliding_attention"]
    full = [i for i, kind in enumerate(kinds) if kind == "full_attention"]
    window = config.get("sliding_window")
    glob = {"attention": spec["attention"], "position": spec["position"]}
    if not global_positions:
        glob["attention"] = {**spec["attention"], "use_position": False}
    if not sliding:
        spec.update(glob)
        return
    if window is None:
        raise ConversionError("config.json has sliding_attention layers but no sliding_window")
    local = {
        "attention": {**spec["attention"], "kind": "local", "window": int(window)},
        "position": local_position or spec["position"],
    }
    if not full:
        spec.update(local)
        return
    entry_is_sliding = isinstance(layer_slice(sliding, n), str) or not isinstance(
        layer_slice(full, n), str
    )
    base, entry = (glob, local) if entry_is_sliding else (local, glob)
    spec.update(base)
    parts = {k: v for k, v in entry.items() if v != base[k]}
    selected = sliding if entry_is_sliding else full
    spec["layers"] = [*spec.get("layers", []), {"select": layer_slice(selected, n), **parts}]


def sliding_config(config: dict[str, Any], spec: Mapping[str, Any]) -> None:
    """The inverse of `sliding_layers`: `layer_types` and `sliding_window` from each layer."""
    layers = [c["attention"] for c in layer_components(stack_config(dict(spec), "decoder"))]
    config["layer_types"] = [
        "sliding_attention" if a["kind"] == "local" else "full_attention" for a in layers
    ]
    config["sliding_window"] = next((a["window"] for a in layers if a["kind"] == "local"), None)


class Gemma2Converter(GemmaConverter, model_type="gemma2", hf_prefix="Gemma2"):
    fixed = {**GemmaConverter.fixed, **spec_parts("block: sandwich_ln")}
    fields = (
        *GemmaConverter.fields,
        Field("attn_logit_softcapping", "attention.softcap", None),
    )
    tasks = decoder_tasks("ForCausalLM", capped_lm_task(), token="score")
    tensors = table(
        SANDWICH_TENSORS + MLP_TENSORS,
        prefixes=("model.", "transformer.", ""),
        ignore=ROTARY_BUFFER,
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Score scale from query_pre_attn_scalar, and the sliding-window layers."""
        if config.get("use_bidirectional_attention"):
            raise ConversionError("config.json use_bidirectional_attention=true is not supported")
        super().adjust(spec, config)
        scalar = config.get("query_pre_attn_scalar")
        if scalar is not None:
            spec["attention"]["scale"] = float(scalar) ** -0.5
        sliding_layers(spec, config, default_every=2)

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """The inverse of `adjust`: the score scale and the sliding-window layers."""
        super().adjust_config(config, spec)
        scale = spec["attention"].get("scale")
        if scale is not None:
            scalar = scale**-2
            near = round(scalar)
            config["query_pre_attn_scalar"] = near if abs(scalar - near) < 1e-6 * near else scalar
        sliding_config(config, spec)
