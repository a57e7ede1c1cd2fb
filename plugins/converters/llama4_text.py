"""Llama 4's text model (`llama4_text`: Llama4ForCausalLM, Llama4TextModel): Llama with
interleaved rotary, and per layer (`no_rope_layers`, `layer_types`, `moe_layers`) either a
rotary layer that attends in chunks (`attention_chunk_size`) with unscaled RMS ("L2") q/k norms
after the rotation, or a NoPE layer over every key whose queries warm with their index
(`attn_temperature_tuning`); and a SwiGLU of `intermediate_size_mlp` or experts that take the
sigmoid router score on their input beside a shared expert."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import ConversionError, Converter, parse_fields, spec_parts
from archzoo.specs.plan import layer_components, stack_config

from .common import HEADLESS, PAD, lm_task, table
from .gemma2 import layer_slice
from .llama import ATTENTION_TENSORS, ROTARY_BUFFER
from .rope import rope_config, rope_parameters

FEED_FORWARD_TENSORS = """
        layers.{i}.feed_forward.(gate_proj,up_proj,down_proj)       GATE,UP,DOWN
        layers.{i}.feed_forward.router                              ROUTER
        layers.{i}.feed_forward.experts.gate_up_proj                EXPERTS_IN      tensor
        layers.{i}.feed_forward.experts.down_proj                   EXPERTS_OUT     tensor
        layers.{i}.feed_forward.shared_expert.(gate_proj,up_proj)   SHARED_UP       fuse
        layers.{i}.feed_forward.shared_expert.down_proj             SHARED_DOWN
"""
DENSE = {"kind": "glu", "activation": "swiglu"}


class Llama4TextConverter(
    Converter, model_type="llama4_text", hf_prefix="Llama4", family="decoder"
):
    requires = {"hidden_act": "silu"}
    fixed = spec_parts(
        "dropout: 0.0, embedding: token, block: pre_ln, norm: rmsnorm",
        "attention: {kind: mha, fused_qkv: false}",
        "ffn: {kind: moe, expert: glu, activation: swiglu, router: sigmoid, normalize: false,"
        " weigh: inputs, n_shared: 1, aux_loss_coef: 0.0}",  # transformers adds no router loss
    )
    fields = parse_fields(  # Llama4TextConfig's defaults (Llama 4 Scout)
        """
        vocab_size                  vocab_size                          202048
        hidden_size                 d_model                             5120
        num_hidden_layers           n_layers                            48
        num_attention_heads         n_heads                             40
        num_key_value_heads         attention.n_kv_heads                8
        head_dim                    head_dim                            128
        intermediate_size_mlp       d_ff                                16384
        intermediate_size           ffn.d_expert,ffn.d_shared           8192
        num_local_experts           ffn.n_experts                       16
        num_experts_per_tok         ffn.top_k                           1
        max_position_embeddings     max_len                             131072
        attention_dropout           attention_dropout                   0.0
        attention_bias              attention.bias,attention.out_bias   False
        rms_norm_eps                norm.eps                            1e-5
        """
    ) + (*PAD,)
    tasks = {  # Llama4TextModel headless (Llama4Model is the multimodal one)
        "ForCausalLM": lm_task(False),
        "TextModel": HEADLESS,
    }
    tensors = table(
        ATTENTION_TENSORS + FEED_FORWARD_TENSORS, prefixes=("model.", ""), ignore=ROTARY_BUFFER
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Interleaved rotary; each layer's attention and feed-forward as `layers:` entries."""
        theta = {"rope_theta": config.get("rope_theta", 500000.0)}
        spec["position"] = {"kind": "rotary", **rope_parameters({**theta, **config})}
        spec["position"]["interleaved"] = True  # complex pairs: (0, 1), (2, 3), ...
        n = spec["n_layers"]
        attention = [layer_attention(spec["attention"], config, i) for i in range(n)]
        step = int(config.get("interleave_moe_layer_step") or 1)
        moe = config.get("moe_layers")
        moe = set(range(step - 1, n, step) if moe is None else moe)
        ffn = [spec["ffn"] if i in moe else DENSE for i in range(n)]
        spec["layers"] = []
        spec["attention"] = most_common(attention)  # the experts stay the stack's ffn
        for kind, per_layer in (("attention", attention), ("ffn", ffn)):
            groups: dict[str, list[int]] = {}
            for i, part in enumerate(per_layer):
                if part != spec[kind]:
                    groups.setdefault(json.dumps(part, sort_keys=True), []).append(i)
            for key, layers in groups.items():
                spec["layers"].append({"select": layer_slice(layers, n), kind: json.loads(key)})

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """The inverse of `adjust`: rotary, and the per-layer lists from each layer."""
        config.update(rope_config(spec["position"]))
        layers = layer_components(stack_config(dict(spec), "decoder"))
        att = [layer["attention"] for layer in layers]
        config["no_rope_layers"] = [int(a["use_position"]) for a in att]
        config["layer_types"] = [
            "chunked_attention" if a["kind"] == "chunked" else "full_attention" for a in att
        ]
        chunked = next((a for a in att if a["kind"] == "chunked"), None)
        config["attention_chunk_size"] = None if chunked is None else chunked["chunk"]
        config["use_qk_norm"] = any(a["qk_norm"] != "none" for a in att)
        warm = next((a for a in att if a.get("temperature_floor") is not None), None)
        config["attn_temperature_tuning"] = warm is not None
        if warm is not None:
            config["floor_scale"] = warm["temperature_floor"]
            config["attn_scale"] = warm["temperature_scale"]
        config["moe_layers"] = [
            i for i, layer in enumerate(layers) if layer["ffn"]["kind"] == "moe"
        ]


def layer_attention(base: dict[str, Any], config: dict[str, Any], i: int) -> dict[str, Any]:
    """Layer i's attention: chunked or full (`layer_types`), rotary with unscaled q/k norms or
    NoPE with the query temperature (`no_rope_layers`)."""
    n = int(config.get("num_hidden_layers", 48))
    interval = int(config.get("no_rope_layer_interval", 4))
    rope = config.get("no_rope_layers") or [int((j + 1) % interval != 0) for j in range(n)]
    chunk = config.get("attention_chunk_size", 8192)
    kinds = config.get("layer_types") or [
        "chunked_attention" if r and chunk is not None else "full_attention" for r in rope
    ]
    if len(rope) < n or len(kinds) != n:
        raise ConversionError(f"config.json no_rope_layers / layer_types: need {n} entries")
    out = dict(base)
    if kinds[i] == "chunked_attention" and chunk is not None:
        out |= {"kind": "chunked", "chunk": int(chunk)}
    elif kinds[i] != "full_attention":
        raise ConversionError(f"config.json layer_types[{i}]={kinds[i]!r} is not supported")
    if rope[i] and config.get("use_qk_norm", True):
        out |= {"qk_norm": "head", "qk_norm_after_position": True, "qk_norm_scale": False}
    if not rope[i]:
        out["use_position"] = False
        if config.get("attn_temperature_tuning", True):
            out["temperature_floor"] = int(config.get("floor_scale", 8192))
            out["temperature_scale"] = float(config.get("attn_scale", 0.1))
    return out


def most_common(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """The part most layers have (the first of equals): the stack's own."""
    keys = [json.dumps(p, sort_keys=True) for p in parts]
    return json.loads(max(keys, key=lambda k: (keys.count(k), -keys.index(k))))
