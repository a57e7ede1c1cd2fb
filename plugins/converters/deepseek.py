"""DeepSeek-V3: multi-head latent attention, and a mixture of 256 experts with sigmoid,
group-limited routing and a shared expert after `first_k_dense_replace` dense layers."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import parse_fields, spec_parts
from archzoo.specs.plan import layer_components, stack_config

from .common import PAD, SIZES, decoder_tasks, lm_task, table
from .experts import GATE_UP_DOWN_PROJ
from .llama import MLP_TENSORS, ROTARY_BUFFER, LlamaConverter
from .mixtral import ExpertsConverter
from .rope import rope_parameters

MLA_TENSORS = """
        embed_tokens                                    WORD
        layers.{i}.input_layernorm                      ATTN_NORM
        layers.{i}.post_attention_layernorm             FFN_NORM
        layers.{i}.self_attn.(q_proj,q_a_proj,q_a_layernorm,q_b_proj)   Q,Q_A,Q_A_NORM,Q_B
        layers.{i}.self_attn.(kv_a_proj_with_mqa,kv_a_layernorm,kv_b_proj)   KV_A,KV_A_NORM,KV_B
        layers.{i}.self_attn.o_proj                     ATTN_OUT
        norm                                            FINAL_NORM
"""
MOE_TENSORS = """
        layers.{i}.mlp.gate                             ROUTER
        layers.{i}.mlp.gate.e_score_correction_bias     SCORE_BIAS      tensor
        layers.{i}.mlp.experts.gate_up_proj             EXPERTS_IN      transpose   tensor
        layers.{i}.mlp.experts.down_proj                EXPERTS_OUT     transpose   tensor
        layers.{i}.mlp.shared_experts.(gate_proj,up_proj)   SHARED_UP   fuse
        layers.{i}.mlp.shared_experts.down_proj         SHARED_DOWN
"""


def yarn_mscale(factor: float, mscale: float) -> float:
    """DeepSeek's YaRN magnitude 0.1 * mscale * ln(factor) + 1 (1 without stretch)."""
    return 1.0 if factor <= 1 else 0.1 * mscale * math.log(factor) + 1.0


class DeepseekV3Converter(
    ExpertsConverter, LlamaConverter, model_type="deepseek_v3", hf_prefix="DeepseekV3"
):
    requires = {"hidden_act": "silu"}
    per_expert = GATE_UP_DOWN_PROJ
    fixed = spec_parts(
        "dropout: 0.0, embedding: token, block: pre_ln, norm: rmsnorm",
        "attention: {kind: mla}",
        "ffn: {kind: moe, expert: glu, activation: swiglu, router: sigmoid, choice_bias: true,"
        " aux_loss_coef: 0.0, router_fp32: true, fp32_weights: true}",  # transformers' fp32 gate
    )
    fields = (
        *SIZES,
        *parse_fields(
            """
            max_position_embeddings     max_len                             4096
            attention_dropout           attention_dropout                   0.0
            attention_bias              attention.bias                      False
            rms_norm_eps                norm.eps                            1e-6
            qk_rope_head_dim            head_dim                            64
            kv_lora_rank                attention.kv_lora_rank              512
            q_lora_rank                 attention.q_lora_rank               None
            qk_nope_head_dim            attention.qk_nope_head_dim          128
            v_head_dim                  attention.v_head_dim                128
            n_routed_experts            ffn.n_experts                       256
            num_experts_per_tok         ffn.top_k                           8
            moe_intermediate_size       ffn.d_expert                        2048
            n_shared_experts            ffn.n_shared                        1
            routed_scaling_factor       ffn.routed_scale                    2.5
            n_group                     ffn.n_groups                        1
            topk_group                  ffn.topk_groups                     None
            norm_topk_prob              ffn.normalize                       True
            """
        ),
        *PAD,
    )
    tasks = decoder_tasks("ForCausalLM", lm_task(False), token="score")
    tensors = table(
        MLA_TENSORS + MLP_TENSORS + MOE_TENSORS,
        prefixes=("model.", ""),
        ignore=ROTARY_BUFFER,
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Interleaved rotary (+ YaRN), the YaRN softmax scale, and the first dense layers."""
        rope = rope_parameters(config)
        interleaved = config.get("rope_interleave")
        spec["position"] = {
            "kind": "rotary",
            **rope,
            "interleaved": True if interleaved is None else bool(interleaved),
        }
        mscale_all_dim = rope.get("mscale_all_dim") or 0
        if rope.get("scaling", "none") != "none" and mscale_all_dim:
            m = yarn_mscale(float(rope["factor"]), float(mscale_all_dim))
            qk = spec["attention"]["qk_nope_head_dim"] + spec["head_dim"]
            spec["attention"]["scale"] = qk**-0.5 * m * m
        dense = min(int(config.get("first_k_dense_replace") or 0), spec["n_layers"])
        if dense:  # these layers keep a dense SwiGLU of intermediate_size
            spec["layers"] = [
                {"select": list(range(dense)), "ffn": {"kind": "glu", "activation": "swiglu"}}
            ]

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """The inverse of `adjust`: rotary interleaving and the count of leading dense layers
        (the YaRN scale follows from rope_parameters; dense layers elsewhere read back as
        routed, so export's round trip names them)."""
        super().adjust_config(config, spec)
        config["rope_interleave"] = bool(spec["position"].get("interleaved", False))
        layers = layer_components(stack_config(dict(spec), "decoder"))
        dense = [i for i, c in enumerate(layers) if c["ffn"]["kind"] != "moe"]
        config["first_k_dense_replace"] = len(dense)
