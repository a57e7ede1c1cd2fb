"""GPT-2: pre-LN decoder, learned positions, Conv1D (transposed) projections."""

from __future__ import annotations

from archzoo.converter import Converter, Field, Values, parse_fields, spec_parts

from .common import ACTIVATION, LM_HEAD, PAD_AND_TIE, table


class GPT2Converter(Converter):
    model_type = "gpt2"
    family = "decoder"
    requires = {"scale_attn_by_inverse_layer_idx": False}
    fixed = spec_parts(
        "embedding: token, position: learned, block: pre_ln, norm: layernorm, ffn: mlp, head: lm",
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
        *PAD_AND_TIE,
    )
    tensors = table(
        """
        wte                     WORD
        wpe                     POSITION
        h.{i}.(ln_1,ln_2)                       ATTN_NORM,FFN_NORM
        h.{i}.attn.(c_attn,c_proj)              QKV,ATTN_OUT    transpose   # Conv1D: (in, out)
        h.{i}.mlp.(c_fc,c_proj)                 FC_IN,FC_OUT    transpose
        ln_f                    FINAL_NORM
        """,
        LM_HEAD,
        prefixes=("transformer.", ""),
        ignore=("h.{i}.attn.bias", "h.{i}.attn.masked_bias"),  # causal-mask buffers
    )
