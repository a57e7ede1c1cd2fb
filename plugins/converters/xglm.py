"""XGLM (Lin et al., 2021): a pre-LN decoder with a final norm, sqrt(d)-scaled tied token
vectors and fairseq's sinusoidal positions (tensor2tensor frequencies, sines then cosines)
by index from row 2; biased q/k/v, a GELU MLP."""

from __future__ import annotations

from typing import Any

from archzoo.parts.converter import ConversionError, Converter, parse_fields, spec_parts

from .common import ACTIVATION, HEADLESS, lm_task, table


class XGLMConverter(Converter, model_type="xglm", hf_prefix="XGLM", family="decoder"):
    requires = {"add_cross_attention": False}
    fixed = spec_parts(
        "block: pre_ln, ffn: mlp, norm: {kind: layernorm, eps: 1.0e-5}",
        "position: {kind: sinusoidal, layout: halves, frequencies: tensor2tensor, offset: 2}",
        "attention: {kind: mha, fused_qkv: false, bias: true, scale_at: query}",
    )
    fields = parse_fields(
        """
        vocab_size                  vocab_size
        d_model                     d_model
        num_layers                  n_layers
        attention_heads             n_heads
        ffn_dim                     d_ff
        max_position_embeddings     max_len             2048
        dropout                     dropout             0.1
        attention_dropout           attention_dropout   0.1
        activation_dropout          ffn.inner_dropout   0.0
        scale_embedding             embedding.scale     True
        activation_function         ffn.activation      gelu    ACTIVATION
        pad_token_id                pad_token_id        1
        """,
        ACTIVATION=ACTIVATION,
    )
    tasks = {"Model": HEADLESS, "ForCausalLM": lm_task(True)}
    tensors = table(
        """
        embed_tokens                                            WORD
        layers.{i}.self_attn.(q_proj,k_proj,v_proj,out_proj)    Q,K,V,ATTN_OUT
        layers.{i}.(self_attn_layer_norm,final_layer_norm)      ATTN_NORM,FFN_NORM
        layers.{i}.(fc1,fc2)                                    FC_IN,FC_OUT
        layer_norm                                              FINAL_NORM
        """,
        prefixes=("model.", ""),
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """transformers zeroes the table's pad_token_id row: below row 2 no position reads."""
        pad = spec.get("pad_token_id")
        if isinstance(pad, int) and pad >= 2:
            raise ConversionError(
                f"config.json pad_token_id={pad}: XGLM zeroes sinusoid row {pad}, the vector "
                f"of position {pad - 2}; archzoo's sinusoidal positions have no zeroed row"
            )
