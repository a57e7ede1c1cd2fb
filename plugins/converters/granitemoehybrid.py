"""Granite 4.0 hybrid (IBM, 2025): Mamba 2 layers and GQA attention (score scale
`attention_multiplier`, rotary only with `position_embedding_type: rope`) on the attention
layers of `layer_types`; every FFN Granite MoE's experts beside the shared SwiGLU
(`shared_mlp`: the moe's shared expert), or that SwiGLU alone with `num_local_experts: 0`;
Granite's embedding, residual and logit multipliers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import Converter, Field, parse_fields, spec_parts
from archzoo.specs.plan import layer_components, stack_config

from .bamba import MAMBA_KEYS
from .common import HEADLESS, PAD, SIZES, lm_task, table
from .granitemoe import EXPERT_TENSORS
from .mamba2 import read_hybrid_mixer, write_hybrid_mixer
from .mixtral import aux_loss_coef, aux_loss_config
from .rope import rope_config, rope_parameters

TENSORS = """
        embed_tokens                                            WORD
        layers.{i}.(input_layernorm,post_attention_layernorm)   ATTN_NORM,FFN_NORM
        layers.{i}.self_attn.(q_proj,k_proj,v_proj,o_proj)      Q,K,V,ATTN_OUT
        layers.{i}.mamba.(in_proj,conv1d,out_proj,norm)         MIXER_IN,MIXER_CONV,MIXER_OUT,MIXER_NORM
        layers.{i}.mamba.(A_log,dt_bias,D)                      A_LOG,DT_BIAS,SSM_D     tensor
        layers.{i}.shared_mlp.(input_linear,output_linear)      SHARED_UP,SHARED_DOWN
        layers.{i}.shared_mlp.input_linear                      GATE,UP     split
        layers.{i}.shared_mlp.output_linear                     DOWN
        norm                                                    FINAL_NORM
"""  # shared_mlp: a moe's shared expert, or (no experts) the whole FFN
ATTENDS = ("full_attention", "attention")  # layer_types' names of attention (new, old)


class GraniteMoeHybridConverter(
    Converter, model_type="granitemoehybrid", hf_prefix="GraniteMoeHybrid", family="decoder"
):
    requires = {"hidden_act": "silu"}
    fixed = spec_parts("dropout: 0.0, embedding: token, block: pre_ln, norm: rmsnorm")
    fields = (
        *SIZES,
        *parse_fields(
            """
            max_position_embeddings     max_len                         2048
            attention_dropout           attention_dropout               0.0
            rms_norm_eps                norm.eps,attention.norm_eps     1e-6
            embedding_multiplier        embedding.multiplier            1.0
            residual_multiplier         block.residual_scale            1.0
            """
            + MAMBA_KEYS
        ),
        Field("head_dim", "head_dim", lambda c: c["hidden_size"] // c["num_attention_heads"]),
        *PAD,
    )
    tasks = {"Model": HEADLESS, "ForCausalLM": lm_task(False)}
    tensors = table(TENSORS + EXPERT_TENSORS, prefixes=("model.", ""))

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """The mixer, the attention layers, positions, the FFN and the logit scale."""
        get, mixer = config.get, {"kind": "mamba2", **spec["attention"]}
        read_hybrid_mixer(mixer, config, get("mamba_d_head", "auto"))
        spec["attention"] = mixer
        attends = [i for i, k in enumerate(get("layer_types") or ()) if k in ATTENDS]
        kv = get("num_key_value_heads") or config["num_attention_heads"]
        scale = float(get("attention_multiplier", 1.0))
        attention = {"kind": "mha", "fused_qkv": False, "n_kv_heads": kv, "scale": scale}
        attention["bias"] = bool(get("attention_bias", False))
        spec["layers"] = [{"select": attends, "attention": attention}] if attends else []
        rope = get("position_embedding_type") == "rope"
        spec["position"] = {"kind": "rotary", **rope_parameters(config)} if rope else "none"
        shared, experts = int(get("shared_intermediate_size", 1024)), get("num_local_experts", 8)
        spec["ffn"] = {"kind": "glu", "activation": "swiglu"}
        if experts:
            spec["ffn"].update(kind="moe", expert="glu", router="topk_softmax", router_fp32=True)
            spec["ffn"].update(n_experts=experts, top_k=get("num_experts_per_tok", 2))
            spec["ffn"].update(n_shared=1, d_shared=shared)
            aux_loss_coef(spec, config)
        else:
            spec["d_ff"] = shared
        if spec["head"]["kind"] == "lm":
            spec["head"]["logit_scale"] = 1.0 / float(get("logits_scaling") or 1.0)

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """The inverse of `adjust`."""
        write_hybrid_mixer(config, spec["attention"], spec["d_model"], "GraniteMoeHybridConfig")
        layers = [c["attention"] for c in layer_components(stack_config(dict(spec), "decoder"))]
        kinds = ["full_attention" if a["kind"] == "mha" else "linear_attention" for a in layers]
        config["layer_types"] = kinds
        for att in (a for a in layers if a["kind"] == "mha"):
            config["num_key_value_heads"] = att["n_kv_heads"] or spec["n_heads"]
            config["attention_multiplier"] = att["scale"] or spec["head_dim"] ** -0.5
            config["attention_bias"] = bool(att["bias"])
        position, ffn = spec["position"], spec["ffn"]
        rotary = isinstance(position, Mapping) and position.get("kind") == "rotary"
        config["position_embedding_type"] = "rope" if rotary else None
        config.update(rope_config(position) if rotary else {})
        if ffn["kind"] == "moe":
            config.update(num_local_experts=ffn["n_experts"], num_experts_per_tok=ffn["top_k"])
            config["shared_intermediate_size"] = ffn.get("d_shared") or 0
            aux_loss_config(config, spec)
        else:
            config.update(num_local_experts=0, shared_intermediate_size=spec["d_ff"])
        if (spec.get("head") or {}).get("kind") == "lm":
            config["logits_scaling"] = 1.0 / spec["head"].get("logit_scale", 1.0)
