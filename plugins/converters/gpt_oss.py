"""GPT-OSS: a Llama-layout MoE with attention biases and per-head sinks, sliding-window and
full layers alternating (`layer_types`), YaRN rotary, a biased router whose top-k logits are
softmaxed, and biased experts with the clamped SwiGLU; gate/up interleaved in the fused tensor."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import ConversionError, Field, parse_fields, spec_parts
from archzoo.specs.plan import layer_components, stack_config

from .common import PAD, SIZES, table
from .llama import ATTENTION_TENSORS, LlamaConverter
from .mixtral import MOE_FIELDS, aux_loss_coef, aux_loss_config

# transformers' GptOssExperts keep x @ W layout: gate_up (E, D, 2F) alternating gate, up
GPT_OSS_TENSORS = """
        layers.{i}.self_attn.sinks                  SINKS               tensor
        layers.{i}.mlp.router                       ROUTER
        layers.{i}.mlp.experts.gate_up_proj         EXPERTS_IN          deinterleave    tensor
        layers.{i}.mlp.experts.gate_up_proj_bias    EXPERTS_IN_BIAS     deinterleave    tensor
        layers.{i}.mlp.experts.down_proj            EXPERTS_OUT         tensor
        layers.{i}.mlp.experts.down_proj_bias       EXPERTS_OUT_BIAS    tensor
"""
LAYER_TYPES = ("sliding_attention", "full_attention")


class GptOssConverter(LlamaConverter, model_type="gpt_oss", hf_prefix="GptOss"):
    requires = {}  # hidden_act is not read by GPT-OSS's experts
    fixed = {
        **LlamaConverter.fixed,
        **spec_parts(
            "attention: {kind: mha, fused_qkv: false, sinks: true, eager: true}",  # no SDPA
            "norm: {kind: rmsnorm, scale_fp32: true}",  # (w * x) in fp32, rounded once
            "ffn: {kind: moe, expert: glu, activation: swiglu_clamped, router: topk_softmax, "
            "router_bias: true, expert_bias: true}",
        ),
    }
    fields = (
        *SIZES,
        *MOE_FIELDS,
        *parse_fields(
            """
            max_position_embeddings     max_len                             131072
            attention_dropout           attention_dropout                   0.0
            attention_bias              attention.bias,attention.out_bias   True
            rms_norm_eps                norm.eps                            1e-5
            swiglu_alpha                ffn.glu_alpha                       1.702
            swiglu_limit                ffn.glu_limit                       7.0
            """
        ),
        Field("head_dim", "head_dim", lambda c: c["hidden_size"] // c["num_attention_heads"]),
        Field("num_key_value_heads", "attention.n_kv_heads", lambda c: c["num_attention_heads"]),
        *PAD,
    )
    tensors = table(ATTENTION_TENSORS + GPT_OSS_TENSORS, prefixes=("model.", ""))

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """YaRN rotary, the router loss, and a window on the `sliding_attention` layers."""
        if config.get("quantization_config"):
            raise ConversionError(
                "config.json quantization_config: quantized (MXFP4) experts are not supported; "
                "import a dequantized checkpoint"
            )
        super().adjust(spec, config)
        aux_loss_coef(spec, config)
        kinds = list(config.get("layer_types") or ())
        unknown = sorted(set(kinds) - set(LAYER_TYPES))
        if unknown or (kinds and len(kinds) != spec["n_layers"]):
            raise ConversionError(
                f"config.json layer_types={kinds!r}: expected one of {LAYER_TYPES} per layer "
                f"({spec['n_layers']} layers)"
            )
        sliding = [i for i, kind in enumerate(kinds) if kind == "sliding_attention"]
        window = config.get("sliding_window")
        if sliding and window is None:
            raise ConversionError(
                "config.json layer_types has sliding layers but no sliding_window"
            )
        if sliding:  # the same attention with a causal window of `sliding_window` keys
            local = {**spec["attention"], "kind": "local", "window": int(window)}
            spec["layers"] = [{"select": sliding, "attention": local}]

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """The inverse of `adjust`: rotary, router loss, `layer_types` and the window."""
        super().adjust_config(config, spec)
        aux_loss_config(config, spec)
        layers = [c["attention"] for c in layer_components(stack_config(dict(spec), "decoder"))]
        config["layer_types"] = [
            "sliding_attention" if a["kind"] == "local" else "full_attention" for a in layers
        ]
        config["sliding_window"] = next((a["window"] for a in layers if a["kind"] == "local"), None)
