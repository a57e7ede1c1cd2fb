"""DBRX (Databricks): pre-LN blocks with LayerNorms without a shift, q|k|v in one projection
(GQA, clamped to `clip_qkv`), rotary, and a mixture of SwiGLU experts in every layer saved as
(E * F, D) row blocks (`expert_rows`), chosen top-k from a softmax whose weights are
renormalised by their `moe_normalize_expert_weights`-norm (1: their sum)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import ConversionError, Converter, parse_fields, spec_parts

from .common import decoder_tasks, lm_task, table
from .rope import rope_config, rope_parameters


class DbrxConverter(Converter, model_type="dbrx", hf_prefix="Dbrx", family="decoder"):
    fixed = spec_parts(
        "embedding: token, block: pre_ln, norm: {kind: layernorm, bias: false}",
        "attention: {kind: mha, fused_qkv: true, bias: false, out_bias: false}",
        "ffn: {kind: moe, expert: glu, activation: swiglu, router: softmax_topk}",
    )
    fields = parse_fields(
        """
        vocab_size          vocab_size
        d_model             d_model             2048
        n_layers            n_layers            24
        n_heads             n_heads             16
        max_seq_len         max_len             2048
        resid_pdrop         dropout             0.0
        emb_pdrop           embedding.dropout   0.0
        pad_token_id        pad_token_id        None
        """
    )
    tasks = {
        k: v
        for k, v in decoder_tasks("ForCausalLM", lm_task(False)).items()
        if k in ("Model", "ForCausalLM")
    }
    tensors = table(
        """
        wte                                         WORD
        blocks.{i}.norm_attn_norm.norm_1            ATTN_NORM
        blocks.{i}.norm_attn_norm.attn.Wqkv         QKV
        blocks.{i}.norm_attn_norm.attn.out_proj     ATTN_OUT
        blocks.{i}.norm_attn_norm.norm_2            FFN_NORM
        blocks.{i}.ffn.router.layer                 ROUTER
        blocks.{i}.ffn.experts.mlp.(w1,v1)          EXPERTS_IN      expert_rows     tensor
        blocks.{i}.ffn.experts.mlp.w2               EXPERTS_OUT     expert_rows     tensor
        norm_f                                      FINAL_NORM
        """,
        prefixes=("transformer.", ""),
        ignore=("rotary_emb.inv_freq",),
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """The nested attn_config and ffn_config, and the rotary."""
        attn, ffn = config.get("attn_config") or {}, config.get("ffn_config") or {}
        act = (ffn.get("ffn_act_fn") or {"name": "silu"}).get("name", "silu")
        if act != "silu":
            raise ConversionError(f"config.json ffn_config.ffn_act_fn={act!r}: only silu")
        p = ffn.get("moe_normalize_expert_weights", 1.0)
        if p not in (None, 1, 1.0):
            raise ConversionError(
                f"config.json ffn_config.moe_normalize_expert_weights={p!r}: only 1 (a sum)"
            )
        spec["d_ff"] = int(ffn.get("ffn_hidden_size", 3584))
        spec["attention_dropout"] = float(attn.get("attn_pdrop", 0.0))
        spec["attention"].update(n_kv_heads=int(attn.get("kv_n_heads", 1)))
        spec["attention"]["qkv_clamp"] = attn.get("clip_qkv")
        weight = (
            float(ffn.get("moe_loss_weight", 0.01)) if config.get("output_router_logits") else 0.0
        )
        spec["ffn"].update(
            n_experts=int(ffn.get("moe_num_experts", 4)),
            top_k=int(ffn.get("moe_top_k", 1)),
            normalize=p is not None,
            jitter=float(ffn.get("moe_jitter_eps") or 0.0),
            aux_loss_coef=weight,
        )
        legacy = {"rope_theta": attn.get("rope_theta", 10000.0)}  # transformers 4's home
        spec["position"] = {"kind": "rotary", **rope_parameters({**legacy, **config})}

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """The inverse of `adjust`: the nested configs."""
        attention, ffn = spec["attention"], spec["ffn"]
        config["attn_config"] = {
            "attn_pdrop": spec["attention_dropout"],
            "clip_qkv": attention.get("qkv_clamp"),
            "kv_n_heads": attention.get("n_kv_heads") or spec["n_heads"],
            "rope_theta": spec["position"].get("base", 10000.0),  # DbrxAttention reads it
        }
        coef = float(ffn.get("aux_loss_coef") or 0.0)
        config["output_router_logits"] = coef > 0
        config["ffn_config"] = {
            "ffn_hidden_size": spec["d_ff"],
            "moe_num_experts": ffn["n_experts"],
            "moe_top_k": ffn["top_k"],
            "moe_normalize_expert_weights": 1.0 if ffn.get("normalize") else None,
            "moe_jitter_eps": ffn.get("jitter") or None,
            **({"moe_loss_weight": coef} if coef > 0 else {}),
        }
        config.update(rope_config(spec["position"]))
