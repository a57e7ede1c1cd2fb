"""Phi-3.5-MoE (`phimoe`): Mixtral's layout with LayerNorms (shifted), q/k/v/o biases
(`attention_bias`), an LM head bias (`lm_head_bias`), and SparseMixer routing: two experts
picked one after the other, each weighted by a softmax over the scores within
2 x `router_jitter_noise` (relative) of the best one left."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import ConversionError, Field, parse_fields, spec_parts

from .common import TASK_LM, decoder_tasks, table, tie
from .common import task as make_task
from .experts import PerExpert
from .llama import ATTENTION_TENSORS, ROTARY_BUFFER, LlamaConverter
from .mistral import MistralConverter
from .mixtral import ExpertsConverter, aux_loss_coef, aux_loss_config, without_ffn_bias

LM = make_task("kind: lm", TASK_LM, fields=(tie(False), Field("lm_head_bias", "head.bias", False)))


class PhimoeConverter(ExpertsConverter, MistralConverter, model_type="phimoe", hf_prefix="Phimoe"):
    per_expert = PerExpert.under("block_sparse_moe.experts.{e}", "w1", "w3", "w2")
    fixed = {
        **LlamaConverter.fixed,
        **spec_parts(
            "norm: layernorm",
            "ffn: {kind: moe, expert: glu, activation: swiglu, router: sparsemixer,"
            " normalize: false}",
        ),
    }
    fields = (  # PhimoeConfig has no num_experts alias: export writes num_local_experts
        *without_ffn_bias(MistralConverter.fields),
        *parse_fields(
            """
            num_local_experts       ffn.n_experts       16
            num_experts_per_tok     ffn.top_k           2
            router_jitter_noise     ffn.mixer_eps       0.01
            input_jitter_noise      ffn.jitter          0.0
            """
        ),
    )
    tasks = {
        k: v
        for k, v in decoder_tasks("ForCausalLM", LM).items()
        if k in ("Model", "ForCausalLM", "ForSequenceClassification")
    }
    tensors = table(
        ATTENTION_TENSORS
        + """
        layers.{i}.mlp.router|layers.{i}.block_sparse_moe.gate  ROUTER
        layers.{i}.mlp.experts.gate_up_proj     EXPERTS_IN      transpose   tensor
        layers.{i}.mlp.experts.down_proj        EXPERTS_OUT     transpose   tensor
        """,
        prefixes=("model.", ""),
        ignore=ROTARY_BUFFER,
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Mistral's window and rotary; LongRoPE's one magnitude; the router loss."""
        params = {**(config.get("rope_scaling") or {}), **(config.get("rope_parameters") or {})}
        short, long = params.get("short_mscale"), params.get("long_mscale")
        super().adjust(spec, config)
        if short is not None or long is not None:
            if short != long:
                raise ConversionError(
                    f"config.json rope short_mscale={short!r} != long_mscale={long!r}: a "
                    "magnitude that switches with the length is not supported"
                )
            spec["position"]["attention_factor"] = float(short)
        aux_loss_coef(spec, config)

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        super().adjust_config(config, spec)
        factor = spec["position"].get("attention_factor")
        if factor is not None and "rope_parameters" in config:
            config["rope_parameters"].update(short_mscale=factor, long_mscale=factor)
        aux_loss_config(config, spec)
