"""Apertus (Swiss AI): Llama's attention with an RMSNorm over each head's queries and keys,
a two-layer MLP (up, down; no biases) with the xIELU activation, whose learned scalars sit
in each layer's `act_fn`, and Llama 3's rotary scaling by default."""

from __future__ import annotations

from typing import Any

from archzoo.parts.converter import Values, parse_fields, spec_parts

from .common import ACTIVATION, decoder_tasks, lm_task, table
from .llama import ROTARY_BUFFER, LlamaConverter
from .qwen import QK_NORM_TENSORS

DEFAULT_ROPE = {  # ApertusConfig's when config.json names none
    "rope_type": "llama3",
    "rope_theta": 12000000.0,
    "factor": 8.0,
    "original_max_position_embeddings": 8192,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
}


class ApertusConverter(LlamaConverter, model_type="apertus", hf_prefix="Apertus"):
    requires = {}
    fixed = {
        **LlamaConverter.fixed,
        **spec_parts("attention: {kind: mha, fused_qkv: false, qk_norm: head}, ffn: {kind: mlp}"),
    }
    fields = (
        *(f for f in LlamaConverter.fields if f.hf != "mlp_bias"),
        *parse_fields(
            """
            mlp_bias        ffn.bias            False
            hidden_act      ffn.activation      xielu       ACTIVATION
            """,
            ACTIVATION=Values({**ACTIVATION.table, "xielu": "xielu"}),
        ),
    )
    tasks = {
        k: v
        for k, v in decoder_tasks("ForCausalLM", lm_task(False), token="score").items()
        if k in ("Model", "ForCausalLM", "ForTokenClassification")
    }
    tensors = table(
        """
        embed_tokens                                            WORD
        layers.{i}.attention_layernorm                          ATTN_NORM
        layers.{i}.self_attn.(q_proj,k_proj,v_proj,o_proj)      Q,K,V,ATTN_OUT
        layers.{i}.feedforward_layernorm                        FFN_NORM
        layers.{i}.mlp.(up_proj,down_proj)                      FC_IN,FC_OUT
        layers.{i}.mlp.act_fn.(alpha_p,alpha_n)                 XIELU_ALPHA_P,XIELU_ALPHA_N  tensor
        layers.{i}.mlp.act_fn.(beta,eps)                        XIELU_BETA,XIELU_EPS    tensor
        norm                                                    FINAL_NORM
        """
        + QK_NORM_TENSORS,
        prefixes=("model.", ""),
        ignore=ROTARY_BUFFER,
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Llama's rotary, Llama 3's scaling when the config names no rotary."""
        if not any(k in config for k in ("rope_parameters", "rope_scaling", "rope_theta")):
            config = {**config, "rope_parameters": DEFAULT_ROPE}
        super().adjust(spec, config)
