"""Kolibri-1 (Aleph Alpha, `kolibri1`): GLM-4's sandwich layers (a norm before and after each
sublayer) around EXAONE 4.0's attention (an RMSNorm over each head's queries and keys;
sliding-window layers that rotate, four in five by default, between global layers without
positions) and routed SwiGLU experts with a shared one in every layer, picked by the raw
router logits plus a correction bias and weighed by the sigmoid of those logits."""

from __future__ import annotations

from typing import Any

from archzoo.parts.converter import parse_fields, spec_parts

from .common import table, with_defaults
from .deepseek import MOE_TENSORS
from .exaone4 import Exaone4Converter
from .experts import GATE_UP_DOWN_PROJ
from .llama import ROTARY_BUFFER, LlamaConverter
from .mixtral import ExpertsConverter
from .qwen import QK_NORM_TENSORS

DENSE_KEYS = ("intermediate_size", "attention_bias", "mlp_bias")  # Kolibri1Config has none


class Kolibri1Converter(ExpertsConverter, Exaone4Converter, model_type="kolibri1"):
    hf_prefix = "Kolibri1"
    per_expert = GATE_UP_DOWN_PROJ
    fixed = {
        **LlamaConverter.fixed,
        **spec_parts(
            "block: sandwich_ln",
            "attention: {kind: mha, fused_qkv: false, bias: false, out_bias: false, qk_norm: head}",
            "ffn: {kind: moe, expert: glu, activation: swiglu, router: sigmoid_logits,"
            " choice_bias: true, n_shared: 1, aux_loss_coef: 0.0, router_fp32: true,"
            " fp32_weights: true}",  # transformers' router: fp32 logits and weights
        ),
    }
    fields = (
        *with_defaults(  # Kolibri1Config's defaults
            (f for f in LlamaConverter.fields if f.hf not in DENSE_KEYS),
            max_position_embeddings=262144,
            head_dim=128,
        ),
        *parse_fields(
            """
            moe_intermediate_size               d_ff,ffn.d_expert   512
            shared_expert_intermediate_size     ffn.d_shared        512
            num_local_experts|num_experts       ffn.n_experts       384
            num_experts_per_tok                 ffn.top_k           6
            norm_topk_prob                      ffn.normalize       False
            """
        ),
    )
    tasks = {k: v for k, v in LlamaConverter.tasks.items() if k in ("Model", "ForCausalLM")}
    tensors = table(
        """
        embed_tokens                            WORD
        layers.{i}.input_layernorm              ATTN_NORM
        layers.{i}.self_attn.(q_proj,k_proj,v_proj,o_proj)      Q,K,V,ATTN_OUT
        layers.{i}.post_attn_norm|layers.{i}.post_self_attn_layernorm   ATTN_OUT_NORM
        layers.{i}.post_attention_layernorm     FFN_NORM
        layers.{i}.post_ffn_norm|layers.{i}.post_mlp_layernorm          FFN_OUT_NORM
        norm                                    FINAL_NORM
        """
        + QK_NORM_TENSORS
        + MOE_TENSORS.replace(  # the checkpoints' own names first (transformers renames them)
            "layers.{i}.mlp.gate.e_score_correction_bias",
            "layers.{i}.moe.router.expert_bias|layers.{i}.mlp.gate.e_score_correction_bias",
        ),
        prefixes=("model.", ""),
        ignore=ROTARY_BUFFER,
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """EXAONE 4.0's rotary, sliding and NoPE layers, every fifth layer global by default
        (Kolibri1Config's window: 513)."""
        config = {"sliding_window": 513, "sliding_window_pattern": 5, **config}
        super().adjust(spec, config)
