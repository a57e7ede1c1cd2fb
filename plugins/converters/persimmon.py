"""Persimmon (Adept): pre-LN LayerNorm blocks, q|k|v fused per head (NeoX's layout) with
biases, a LayerNorm over each head's queries and keys, rotary on half of each head, a
squared-ReLU MLP with biases, an untied LM head without bias."""

from __future__ import annotations

from archzoo.parts.converter import Values, parse_fields, spec_parts

from .common import ACTIVATION, decoder_tasks, lm_task, table
from .llama import ROTARY_BUFFER
from .phi import PhiConverter

PHI_ONLY = ("resid_pdrop", "embd_pdrop", "hidden_act", "qk_layernorm")
HEADS = ("num_key_value_heads", "head_dim")  # Persimmon's heads: all of d_model / n_heads


class PersimmonConverter(PhiConverter, model_type="persimmon", hf_prefix="Persimmon"):
    fixed = spec_parts(
        "embedding: token, norm: layernorm, block: pre_ln, ffn: {kind: mlp, bias: true}",
        "attention: {kind: mha, fused_qkv: true, bias: true, out_bias: true}",
    )
    fields = (
        *(f for f in PhiConverter.fields if f.hf not in (*PHI_ONLY, *HEADS)),
        *parse_fields(  # hidden_dropout drops the MLP's output (archzoo: both sublayers')
            """
            hidden_dropout      dropout                 0.0
            hidden_act          ffn.activation          relu2       ACTIVATION
            qk_layernorm        attention.qk_norm       True        QK_NORM
            """,
            ACTIVATION=ACTIVATION,
            QK_NORM=Values({False: "none", True: "head"}),
        ),
    )
    tasks = {
        k: v
        for k, v in decoder_tasks("ForCausalLM", lm_task(False), token="score").items()
        if k != "ForQuestionAnswering"
    }
    tensors = table(
        """
        embed_tokens                                            WORD
        layers.{i}.input_layernorm                              ATTN_NORM
        layers.{i}.self_attn.query_key_value                    QKV     heads_interleaved
        layers.{i}.self_attn.dense                              ATTN_OUT
        layers.{i}.self_attn.(q_layernorm,k_layernorm)          Q_NORM,K_NORM
        layers.{i}.post_attention_layernorm                     FFN_NORM
        layers.{i}.mlp.(dense_h_to_4h,dense_4h_to_h)            FC_IN,FC_OUT
        final_layernorm                                         FINAL_NORM
        """,
        prefixes=("model.", ""),
        ignore=ROTARY_BUFFER,
    )
