"""Granite 4.0 hybrid (IBM, 2025; GraniteMoeHybrid): Mamba 2 layers and, on the `attention`
layers of `layer_types`, GQA attention scaled by `attention_multiplier` (rotary only with
`position_embedding_type: rope`); every FFN Granite MoE's experts beside a shared SwiGLU
(`shared_mlp`), or that shared SwiGLU alone when `num_local_experts` is 0; Granite's
embedding, residual and logit multipliers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import ConversionError, Converter, Field, parse_fields, spec_parts
from archzoo.specs.plan import layer_components, stack_config

from .common import HEADLESS, PAD, SIZES, lm_task, table
from .granitemoe import EXPERT_TENSORS
from .mamba2 import _number, time_step_limit
from .mixtral import aux_loss_coef, aux_loss_config
from .rope import rope_config, rope_parameters

TENSORS = """
        embed_tokens                                            WORD
        layers.{i}.input_layernorm                              ATTN_NORM
        layers.{i}.self_attn.(q_proj,k_proj,v_proj,o_proj)      Q,K,V,ATTN_OUT
        layers.{i}.mamba.(in_proj,conv1d,out_proj)              MIXER_IN,MIXER_CONV,MIXER_OUT
        layers.{i}.mamba.norm                                   MIXER_NORM
        layers.{i}.mamba.A_log                                  A_LOG       tensor
        layers.{i}.mamba.dt_bias                                DT_BIAS     tensor
        layers.{i}.mamba.D                                      SSM_D       tensor
        layers.{i}.post_attention_layernorm                     FFN_NORM
        layers.{i}.shared_mlp.input_linear                      SHARED_UP
        layers.{i}.shared_mlp.output_linear                     SHARED_DOWN
        layers.{i}.shared_mlp.input_linear                      GATE,UP     split
        layers.{i}.shared_mlp.output_linear                     DOWN
        norm                                                    FINAL_NORM
"""  # the shared MLP: a moe's shared expert, or (no experts) the whole FFN
KINDS = {"linear_attention": "mamba", "mamba": "mamba", "full_attention": "mha", "attention": "mha"}


class GraniteMoeHybridConverter(
    Converter, model_type="granitemoehybrid", hf_prefix="GraniteMoeHybrid", family="decoder"
):
    requires = {"hidden_act": "silu"}
    fixed = spec_parts(
        "dropout: 0.0, embedding: token, block: pre_ln, norm: rmsnorm",
        "attention: {kind: mamba2}",
    )
    fields = (
        *SIZES,
        *parse_fields(
            """
            max_position_embeddings     max_len                         2048
            attention_dropout           attention_dropout               0.0
            rms_norm_eps                norm.eps,attention.norm_eps     1e-6
            embedding_multiplier        embedding.multiplier            1.0
            residual_multiplier         block.residual_scale            1.0
            mamba_d_state               attention.state_size            256
            mamba_n_groups              attention.n_groups              1
            mamba_d_conv                attention.conv_kernel           4
            mamba_conv_bias             attention.conv_bias             True
            mamba_proj_bias             attention.bias                  False
            mamba_chunk_size            attention.chunk_size            256
            """
        ),
        Field("head_dim", "head_dim", lambda c: c["hidden_size"] // c["num_attention_heads"]),
        Field("mamba_expand", "attention.d_inner", 2),  # read and written by adjust
        *PAD,
    )
    tasks = {"Model": HEADLESS, "ForCausalLM": lm_task(False)}
    tensors = table(TENSORS + EXPERT_TENSORS, prefixes=("model.", ""))

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """The mixer's sizes, the attention layers, positions, the FFN and the logit scale."""
        get, hidden = config.get, config["hidden_size"]
        mixer = spec["attention"]
        mixer["d_inner"] = int(get("mamba_expand", 2) * hidden)
        heads, width = get("mamba_n_heads", 128), get("mamba_d_head", "auto")
        mixer["head_dim"] = mixer["d_inner"] // heads if width in ("auto", None) else int(width)
        if heads * mixer["head_dim"] != mixer["d_inner"]:
            raise ConversionError(
                f"config.json mamba_n_heads x mamba_d_head = {heads} x {mixer['head_dim']} is "
                f"not mamba_expand x hidden_size = {mixer['d_inner']}"
            )
        low, high = (_number(v) for v in get("time_step_limit") or (0.0, float("inf")))
        mixer["dt_min"], mixer["dt_max"] = low, None if high == float("inf") else high
        kinds = get("layer_types") or get("layers_block_type") or ["mamba"] * spec["n_layers"]
        unknown = sorted(set(kinds) - set(KINDS))
        if unknown or len(kinds) != spec["n_layers"]:
            raise ConversionError(
                f"config.json layer_types {kinds!r}: expected {spec['n_layers']} of "
                f"{', '.join(KINDS)}"
            )
        attends = [i for i, k in enumerate(kinds) if KINDS[k] == "mha"]
        if attends:
            attention = {
                "kind": "mha",
                "fused_qkv": False,
                "bias": bool(get("attention_bias", False)),
                "n_kv_heads": get("num_key_value_heads") or config["num_attention_heads"],
                "scale": float(get("attention_multiplier", 1.0)),
            }
            spec["layers"] = [{"select": attends, "attention": attention}]
        rope = get("position_embedding_type") == "rope"
        spec["position"] = {"kind": "rotary", **rope_parameters(config)} if rope else "none"
        shared = int(get("shared_intermediate_size", 1024))
        experts = int(get("num_local_experts", 8))
        if experts:
            spec["ffn"] = {
                "kind": "moe",
                "expert": "glu",
                "activation": "swiglu",
                "router": "topk_softmax",
                "router_fp32": True,
                "n_experts": experts,
                "top_k": int(get("num_experts_per_tok", 2)),
                "n_shared": 1,
                "d_shared": shared,
            }
            aux_loss_coef(spec, config)
        else:  # the shared MLP alone
            spec["ffn"], spec["d_ff"] = {"kind": "glu", "activation": "swiglu"}, shared
        if spec["head"]["kind"] == "lm":
            spec["head"]["logit_scale"] = 1.0 / float(get("logits_scaling") or 1.0)

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """The inverse of `adjust`."""
        mixer, d = spec["attention"], spec["d_model"]
        if mixer["d_inner"] % d:
            raise ConversionError(
                f"attention.d_inner {mixer['d_inner']} is not a whole multiple of d_model {d}: "
                "GraniteMoeHybridConfig has only an integer mamba_expand"
            )
        config["mamba_expand"] = mixer["d_inner"] // d
        config["mamba_n_heads"] = mixer["d_inner"] // mixer["head_dim"]
        config["mamba_d_head"] = mixer["head_dim"]
        config.pop("time_step_limit", None)
        config.update(time_step_limit(mixer["dt_min"], mixer["dt_max"]))
        layers = [c["attention"] for c in layer_components(stack_config(dict(spec), "decoder"))]
        config["layer_types"] = [
            "full_attention" if a["kind"] == "mha" else "linear_attention" for a in layers
        ]
        att = next((a for a in layers if a["kind"] == "mha"), None)
        if att is not None:
            config["num_key_value_heads"] = att["n_kv_heads"] or spec["n_heads"]
            config["attention_bias"] = bool(att["bias"])
            config["attention_multiplier"] = att["scale"] or spec["head_dim"] ** -0.5
        position = spec["position"]
        rotary = isinstance(position, Mapping) and position.get("kind") == "rotary"
        config["position_embedding_type"] = "rope" if rotary else None
        if rotary:
            config.update(rope_config(position))
        ffn = spec["ffn"]
        if ffn["kind"] == "moe":
            config["num_local_experts"], config["num_experts_per_tok"] = (
                ffn["n_experts"],
                ffn["top_k"],
            )
            config["shared_intermediate_size"] = ffn.get("d_shared") or 0
            aux_loss_config(config, spec)
        else:
            config["num_local_experts"], config["shared_intermediate_size"] = 0, spec["d_ff"]
        head = spec.get("head") or {}
        if head.get("kind") == "lm":
            config["logits_scaling"] = 1.0 / head.get("logit_scale", 1.0)
