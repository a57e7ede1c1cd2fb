"""Falcon: fused q|k|v grouped per key/value head, parallel attention and MLP (one shared
LayerNorm in the old architecture, two in the new one), rotary or ALiBi, tied head."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import (
    ConversionError,
    Converter,
    Field,
    get,
    parse_fields,
    spec_parts,
)
from archzoo.parts.hf_tensors import TensorTable

from .common import ACTIVATION, PAD, TIED_CAUSAL_LM, table
from .rope import rope_parameters

LAYERS = """
    word_embeddings                                 WORD
    h.{i}.self_attention.query_key_value            QKV     kv_grouped
    h.{i}.self_attention.dense                      ATTN_OUT
    h.{i}.mlp.(dense_h_to_4h,dense_4h_to_h)         FC_IN,FC_OUT
    ln_f                                            FINAL_NORM
"""
ONE_NORM = "h.{i}.(input_layernorm,post_attention_layernorm)   ATTN_NORM,FFN_NORM\n"
TWO_NORMS = "h.{i}.(ln_attn,ln_mlp)   ATTN_NORM,FFN_NORM\n"  # new architecture
PREFIXES = ("transformer.", "")
BUFFERS = ("rotary_emb.inv_freq",)


def two_norms(spec: Mapping[str, Any]) -> bool:
    """Whether a spec's blocks have a norm per branch (ln_attn, ln_mlp)."""
    block = spec.get("block")
    return isinstance(block, dict) and block.get("kind") == "parallel" and not block["shared_norm"]


class FalconConverter(Converter, model_type="falcon", hf_prefix="Falcon", family="decoder"):
    requires = {"apply_residual_connection_post_layernorm": False}
    fixed = spec_parts(  # FalconLinear: x @ W.T + b, the bias added apart
        "embedding: token, norm: layernorm, ffn: {kind: mlp, bias_add: after_matmul}",
        "attention: {kind: mha, fused_qkv: true, bias_add: after_matmul}",
    )
    fields = (
        *parse_fields(
            """
            vocab_size                  vocab_size
            hidden_size|n_embed         d_model
            num_hidden_layers|n_layer   n_layers
            num_attention_heads|n_head  n_heads
            max_position_embeddings     max_len                     2048
            hidden_dropout              dropout                     0.0
            attention_dropout           attention_dropout           0.0
            bias                        attention.bias,ffn.bias     False
            layer_norm_epsilon          norm.eps                    1e-5
            activation                  ffn.activation              gelu    ACTIVATION
            """,
            ACTIVATION=ACTIVATION,
        ),
        Field("ffn_hidden_size", "d_ff", lambda c: 4 * get(c, "hidden_size|n_embed")),
        *PAD,
    )
    tasks = TIED_CAUSAL_LM
    tensors = table(LAYERS + ONE_NORM, prefixes=PREFIXES, ignore=BUFFERS)
    two_norm_tensors = table(LAYERS + TWO_NORMS, prefixes=PREFIXES, ignore=BUFFERS)

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Key/value heads, block layout and positions from the architecture flags."""
        new = bool(config.get("new_decoder_architecture"))
        parallel = config.get("parallel_attn", True) or new
        norms = config.get("num_ln_in_parallel_attn") or (2 if new else 1)
        if new and not config.get("parallel_attn", True):
            raise ConversionError(
                "config.json new_decoder_architecture=true with parallel_attn=false is not "
                "supported (transformers cannot run it either)"
            )
        if not new and parallel and norms != 1:
            raise ConversionError(
                f"config.json num_ln_in_parallel_attn={norms} needs new_decoder_architecture=true"
            )
        heads = spec["n_heads"]
        if new:
            kv = get(config, "num_kv_heads|n_head_kv", heads)
        else:
            kv = 1 if config.get("multi_query", True) else heads
        spec["attention"]["n_kv_heads"] = int(kv)
        # the old multi-query layout hands SDPA its one key/value head to broadcast
        spec["attention"]["kv_heads_reach_kernel"] = "grouped" if new else "broadcast"
        block = {"kind": "parallel", "shared_norm": norms == 1, "branches_first": True}
        spec["block"] = block if parallel else "pre_ln"
        if config.get("alibi"):
            # added before the 1/sqrt(hd); built as build_alibi_tensor rounds it
            spec["position"] = {"kind": "alibi", "scaled": True, "form": "key_bf16"}
        else:
            spec["position"] = {"kind": "rotary", **rope_parameters(config)}

    def base_table(self, spec: Mapping[str, Any] | None = None) -> TensorTable:
        """The norm names the model's blocks have: one shared norm, or one per branch."""
        return self.two_norm_tensors if spec is not None and two_norms(spec) else self.tensors
