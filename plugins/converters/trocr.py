"""TrOCR's text decoder (`trocr`, TrOCRForCausalLM): BART's post-LN decoder alone as a causal
LM: learned positions by index from row 2, an optional embedding LayerNorm, a head tied by
default. Its cross-attention (to an image encoder) is saved but no input of the causal LM
reaches it; sinusoidal positions are refused."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import Converter, parse_fields, spec_parts

from .common import ACTIVATION, table, task, tie

# transformers scores its labels as given, unshifted
LM = task("kind: lm, shift: false", "output_projection  LM_PROJ", fields=(tie(True),))
UNREAD = ("layers.{i}.encoder_attn.{m}.{p}", "layers.{i}.encoder_attn_layer_norm.{p}")


class TrOCRConverter(Converter, model_type="trocr", hf_prefix="TrOCR", family="decoder"):
    requires = {"use_learned_position_embeddings": True}
    fixed = spec_parts(
        "block: post_ln, ffn: mlp, norm: {kind: layernorm, eps: 1.0e-5}",
        "embedding: {kind: token, norm: true}, position: {kind: learned, offset: 2, count: absolute}",
        "attention: {kind: mha, fused_qkv: false, bias: true}",
    )
    fields = parse_fields(
        """
        pad_token_id                pad_token_id        1
        vocab_size                  vocab_size          50265
        d_model                     d_model             1024
        decoder_layers              n_layers            12
        decoder_attention_heads     n_heads             16
        decoder_ffn_dim             d_ff                4096
        max_position_embeddings     max_len             512
        dropout                     dropout             0.1
        attention_dropout           attention_dropout   0.0
        activation_dropout          ffn.inner_dropout   0.0
        scale_embedding             embedding.scale     False
        activation_function         ffn.activation      gelu    ACTIVATION
        """,
        ACTIVATION=ACTIVATION,
    )
    tasks = {"ForCausalLM": LM}
    tensors = table(
        """
        embed_tokens                                            WORD
        embed_positions                                         POSITION
        layernorm_embedding                                     EMBED_NORM
        layers.{i}.self_attn.(q_proj,k_proj,v_proj,out_proj)    Q,K,V,ATTN_OUT
        layers.{i}.(self_attn_layer_norm,fc1,fc2,final_layer_norm)  ATTN_NORM,FC_IN,FC_OUT,FFN_NORM
        """,
        prefixes=("model.decoder.",),
        ignore=UNREAD,
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """The embedding LayerNorm where `layernorm_embedding` (the default) says so."""
        spec["embedding"]["norm"] = bool(config.get("layernorm_embedding", True))

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        config["layernorm_embedding"] = bool(spec["embedding"].get("norm"))
        config["is_decoder"] = True
        config["cross_attention_hidden_size"] = None  # no encoder: the zero cross-attention's

    def export_state(self, state: Any, names: Any, ctx: Any, prefix: Any = None, task: Any = None):
        """The table's tensors and the cross-attention TrOCRForCausalLM builds: zero
        projections and a unit norm (no output reads them)."""
        out = super().export_state(state, names, ctx, prefix, task)
        lead = "model.decoder." if prefix is None else prefix
        w = out[f"{lead}layers.0.self_attn.q_proj.weight"]  # (d, d)
        for i in range(ctx["n_layers"]):
            at = f"{lead}layers.{i}.encoder_attn"
            for m in ("q_proj", "k_proj", "v_proj", "out_proj"):
                out[f"{at}.{m}.weight"], out[f"{at}.{m}.bias"] = w * 0, w[0] * 0  # (d, d), (d,)
            out[f"{at}_layer_norm.weight"], out[f"{at}_layer_norm.bias"] = w[0] * 0 + 1, w[0] * 0
        return out
