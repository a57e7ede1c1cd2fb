"""GPT-J: attention and MLP in parallel on one shared LayerNorm, q/k/v/out without biases,
rotary on the first `rotary_dim` features of each head in adjacent pairs (rotate every two),
an untied LM head with a bias."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import Converter, get, spec_parts

from .common import decoder_tasks, table, task, tie, with_defaults
from .gpt2 import GPT2Converter

LM = task("kind: lm, bias: true", "lm_head  LM_PROJ", fields=(tie(False),))


class GPTJConverter(Converter, model_type="gptj", hf_prefix="GPTJ", family="decoder"):
    fixed = spec_parts(
        "embedding: token, norm: layernorm, ffn: mlp",
        "block: {kind: parallel, shared_norm: true, branches_first: true}",
        "attention: {kind: mha, fused_qkv: false, bias: false, out_bias: false}",
    )
    fields = with_defaults(  # GPT-2's keys and defaults but these, and no score-scale switch
        (f for f in GPT2Converter.fields if f.hf != "scale_attn_weights"),
        n_positions=2048,
        resid_pdrop=0.0,
        attn_pdrop=0.0,
        embd_pdrop=0.0,
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
