"""GPT-2: pre-LN decoder, learned positions, Conv1D (transposed) projections."""

from __future__ import annotations

from archzoo.parts.converter import Converter, Field, Values, parse_fields, spec_parts

from .common import (
    ACTIVATION,
    GPT2_TABLES_AND_NORMS,
    PAD,
    TWO_HEADS,
    decoder_tasks,
    lm_task,
    table,
)


class GPT2Converter(Converter, model_type="gpt2", hf_prefix="GPT2", family="decoder"):
    requires = {"scale_attn_by_inverse_layer_idx": False}
    fixed = spec_parts(
        "embedding: token, position: learned, block: pre_ln, norm: layernorm, ffn: mlp",
        "attention: {kind: mha, fused_qkv: true, bias: true}",
    )
    fields = (
        *parse_fields(
            """
            vocab_size              vocab_size
            n_embd                  d_model
            n_layer                 n_layers
            n_head                  n_heads
            n_positions             max_len
            resid_pdrop             dropout             0.1
            attn_pdrop              attention_dropout   0.1
            embd_pdrop              embedding.dropout   0.1
            layer_norm_epsilon      norm.eps            1e-5
            activation_function     ffn.activation      gelu_new    ACTIVATION
            scale_attn_weights      attention.scale     True        SCALE
            """,
            ACTIVATION=ACTIVATION,
            SCALE=Values({True: None, False: 1.0}),  # False: unscaled scores
        ),
        Field("n_inner", "d_ff", lambda c: 4 * c["n_embd"]),
        *PAD,
    )
    tasks = decoder_tasks("LMHeadModel", lm_task(True))
    refused = {"DoubleHeadsModel": TWO_HEADS}
    tensors = table(
        GPT2_TABLES_AND_NORMS
        + """
        h.{i}.attn.(c_attn,c_proj)      QKV,ATTN_OUT    transpose   # Conv1D stores (in, out)
        h.{i}.mlp.(c_fc,c_proj)         FC_IN,FC_OUT    transpose
        """,
        prefixes=("transformer.", ""),
        ignore=("h.{i}.attn.bias", "h.{i}.attn.masked_bias"),  # causal-mask buffers
    )
