"""BLOOM: ALiBi, embedding LayerNorm, per-head fused QKV, tied head."""

from __future__ import annotations

from typing import Any

from archzoo.parts.converter import Converter, parse_fields, spec_parts

from .common import PAD, TIED_CAUSAL_LM, megatron_layer, table


class BloomConverter(Converter, model_type="bloom", hf_prefix="Bloom", family="decoder"):
    requires = {"apply_residual_connection_post_layernorm": False}
    fixed = spec_parts(
        "block: pre_ln, norm: layernorm",
        "embedding: {kind: token, norm: true}",
        # transformers' BLOOM rounds as it computes: bias + scale * q k^T in one baddbmm over
        # the float32 slope * key position rounded to bf16, and its own tanh-GELU op order
        "position: {kind: alibi, form: key}",
        "attention: {kind: mha, fused_qkv: true, bias: true, eager: true, fused_bias: true}",
        "ffn: {kind: mlp, activation: gelu_bloom}",
    )
    fields = (
        *parse_fields(
            """
            vocab_size                  vocab_size
            hidden_size|n_embed         d_model
            n_layer                     n_layers
            n_head                      n_heads
            seq_length                  max_len             2048
            hidden_dropout              dropout             0.0
            attention_dropout           attention_dropout   0.0
            layer_norm_epsilon          norm.eps            1e-5
            """
        ),
        *PAD,
    )
    tasks = TIED_CAUSAL_LM
    tensors = table(
        """
        word_embeddings                         WORD
        word_embeddings_layernorm               EMBED_NORM
        ln_f                                    FINAL_NORM
        """
        + megatron_layer("h.{i}", "self_attention"),
        prefixes=("transformer.", ""),
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """BLOOM's MLP is always 4 x d_model wide (no config key)."""
        spec["d_ff"] = 4 * spec["d_model"]
