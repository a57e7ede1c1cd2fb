"""MPT: ALiBi, no biases anywhere (LayerNorms included), fused [q | k | v], an exact-GELU MLP
`expansion_ratio` times d_model wide, optional q/k/v clipping and score scale, tied head.

transformers 5.24 builds a 4x MLP whatever `expansion_ratio` says (MosaicML's own code, which
trained these checkpoints, reads it), so a checkpoint with another ratio imports here but
transformers cannot load it, and its export is refused by to_hf's probe."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import ConversionError, Converter, parse_fields, spec_parts

from .common import PAD, TIED_CAUSAL_LM, table

# attn_config keys transformers' MPT cannot honour, with the only value it runs
UNSUPPORTED_ATTENTION = {
    "alibi": True,
    "qk_ln": False,
    "prefix_lm": False,
    "attn_uses_sequence_id": False,
    "alibi_bias_max": 8,
}


class MptConverter(Converter, model_type="mpt", hf_prefix="Mpt", family="decoder"):
    attention_impl = "eager"  # transformers attends op by op here: its bits in 16-bit floats
    requires = {"no_bias": True, "logit_scale": None}
    fixed = spec_parts(
        "embedding: token, position: alibi, block: pre_ln",
        "norm: {kind: layernorm, bias: false}",
        "attention: {kind: mha, fused_qkv: true, bias: false}",
        "ffn: {kind: mlp, activation: gelu, bias: false}",
    )
    fields = (
        *parse_fields(
            """
            vocab_size                  vocab_size
            d_model|hidden_size         d_model
            n_layers|num_hidden_layers  n_layers
            n_heads|num_attention_heads n_heads
            max_seq_len                 max_len         2048
            resid_pdrop                 dropout         0.0
            layer_norm_epsilon          norm.eps        1e-5
            """
        ),
        *PAD,
    )
    tasks = TIED_CAUSAL_LM
    tensors = table(
        """
        wte                                     WORD
        blocks.{i}.norm_1                       ATTN_NORM
        blocks.{i}.attn.Wqkv                    QKV
        blocks.{i}.attn.out_proj                ATTN_OUT
        blocks.{i}.norm_2                       FFN_NORM
        blocks.{i}.ffn.(up_proj,down_proj)      FC_IN,FC_OUT
        norm_f                                  FINAL_NORM
        """,
        prefixes=("transformer.", ""),
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """The MLP width (`expansion_ratio` x d_model), and clipping, score scale and dropout
        from `attn_config`."""
        attn = config.get("attn_config") or {}
        if not isinstance(attn, dict):
            raise ConversionError(f"config.json attn_config must be a mapping, got {attn!r}")
        for key, only in UNSUPPORTED_ATTENTION.items():
            if attn.get(key, only) != only:
                raise ConversionError(
                    f"config.json attn_config.{key}={attn[key]!r} is not supported (only {only!r})"
                )
        ratio = config.get("expansion_ratio", 4)
        width = ratio * spec["d_model"]
        if isinstance(ratio, bool) or not isinstance(ratio, int | float) or width != int(width):
            raise ConversionError(
                f"config.json expansion_ratio={ratio!r}: expected a number that makes "
                f"expansion_ratio * d_model ({spec['d_model']}) a whole width"
            )
        spec["d_ff"] = int(width)
        spec["attention_dropout"] = float(attn.get("attn_pdrop") or 0.0)
        if attn.get("clip_qkv"):
            spec["attention"]["qkv_clamp"] = float(attn["clip_qkv"])
        if attn.get("softmax_scale"):
            spec["attention"]["scale"] = float(attn["softmax_scale"])

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """The MLP width as `expansion_ratio` (an int where d_ff is a whole multiple)."""
        ratio = spec["d_ff"] / spec["d_model"]
        config["expansion_ratio"] = int(ratio) if ratio == int(ratio) else ratio
