"""GPT-J: attention and MLP in parallel on one shared LayerNorm, q/k/v/out without biases,
rotary on the first `rotary_dim` features of each head in adjacent pairs (rotate every two),
an untied LM head with a bias."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.converter import Converter, Field, get, parse_fields, spec_parts

from .common import ACTIVATION, PAD, decoder_tasks, table, task, tie

LM = task("kind: lm, bias: true", "lm_head  LM_PROJ", fields=(tie(False),))


class GPTJConverter(Converter, model_type="gptj", hf_prefix="GPTJ", family="decoder"):
    fixed = spec_parts(
        "embedding: token, block: {kind: parallel, shared_norm: true}, norm: layernorm, ffn: mlp",
        "attention: {kind: mha, fused_qkv: false, bias: false, out_bias: false}",
    )
    fields = (
        *parse_fields(
            """
            vocab_size              vocab_size
            n_embd                  d_model
            n_layer                 n_layers
            n_head                  n_heads
            n_positions             max_len             2048
            resid_pdrop             dropout             0.0
            attn_pdrop              attention_dropout   0.0
            embd_pdrop              embedding.dropout   0.0
            layer_norm_epsilon      norm.eps            1e-5
            activation_function     ffn.activation      gelu_new    ACTIVATION
            """,
            ACTIVATION=ACTIVATION,
        ),
        Field("n_inner", "d_ff", lambda c: 4 * c["n_embd"]),
        *PAD,
    )
    tasks = decoder_tasks("ForCausalLM", LM)
    tensors = table(
        """
        wte                                 WORD
        h.{i}.ln_1                          ATTN_NORM       # one norm feeds both branches
        h.{i}.attn.(q_proj,k_proj,v_proj,out_proj)      Q,K,V,ATTN_OUT
        h.{i}.mlp.(fc_in,fc_out)            FC_IN,FC_OUT
        ln_f                                FINAL_NORM
        """,
        prefixes=("transformer.", ""),
        ignore=tuple(f"h.{{i}}.attn.{b}" for b in ("bias", "masked_bias", "embed_positions")),
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Rotary on `rotary_dim` features of each head (all of them when null), pairwise."""
        head_dim = spec["d_model"] // spec["n_heads"]
        rotary_dim = get(config, "rotary_dim", head_dim)
        spec["position"] = {
            "kind": "rotary",
            "base": 10000.0,
            "fraction": rotary_dim / head_dim,
            "interleaved": True,
        }

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """The inverse of `adjust`: `rotary_dim` from the rotated fraction of a head."""
        position = spec["position"]
        if position.get("kind") == "rotary":
            head_dim = spec["d_model"] // spec["n_heads"]
            config["rotary_dim"] = round(position["fraction"] * head_dim)
