"""NLLB-MoE: M2M-100's pre-LN encoder-decoder whose FFN is, every `*_sparse_step`-th layer,
a mixture of biased ReLU experts with fairseq's Top2Gate: softmax top-2, expert capacity over
the call's tokens (first choices queued before second ones), the kept weights renormalised,
and each weighted expert output times 1 - moe_token_dropout at eval."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from torch import Tensor

from archzoo.parts.converter import ConversionError, TensorSource, get

from .common import table
from .experts import split_numbered, stack_numbered
from .m2m_100 import M2M100Converter

EXPERT = re.compile(
    r"(.*\.ffn\.experts\.)expert_(\d+)\.(fc1\.weight|fc1\.bias|fc2\.weight|fc2\.bias)$"
)
STACKED = re.compile(r"(.*\.ffn\.experts\.)(fc1\.weight|fc1\.bias|fc2\.weight|fc2\.bias)$")


class NllbMoeConverter(M2M100Converter, model_type="nllb-moe", hf_prefix="NllbMoe"):
    requires = {  # the other settings route at random even at eval, or differ in what they drop
        "second_expert_policy": "all",
        "batch_prioritized_routing": False,
        "normalize_router_prob_before_dropping": False,
        "router_dtype": "float32",
    }
    tensors = table(
        """
        shared|{s}.embed_tokens                 WORD
        {s}.embed_positions                     POSITION
        {s}.layers.{i}.self_attn.(q_proj,k_proj,v_proj,out_proj)     Q,K,V,ATTN_OUT
        {s}.layers.{i}.cross_attention.(q_proj,k_proj,v_proj,out_proj)  CROSS_Q,CROSS_K,CROSS_V,CROSS_OUT
        {s}.layers.{i}.(self_attn_layer_norm,cross_attention_layer_norm,ff_layer_norm) ATTN_NORM,CROSS_NORM,FFN_NORM
        {s}.layers.{i}.ffn.(fc1,fc2)            FC_IN,FC_OUT
        {s}.layers.{i}.ffn.router.classifier    ROUTER
        {s}.layers.{i}.ffn.experts.fc1.weight   EXPERTS_IN          transpose   tensor
        {s}.layers.{i}.ffn.experts.fc2.weight   EXPERTS_OUT         transpose   tensor
        {s}.layers.{i}.ffn.experts.fc1.bias     EXPERTS_IN_BIAS     tensor
        {s}.layers.{i}.ffn.experts.fc2.bias     EXPERTS_OUT_BIAS    tensor
        {s}.layer_norm                          FINAL_NORM
        """,
        prefixes=("model.", ""),
        stacks={"encoder": {"s": "encoder"}, "decoder": {"s": "decoder"}},
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """The routed FFN on layers step - 1, 2 step - 1, ... of each stack."""
        super().adjust(spec, config)
        fraction = float(get(config, "moe_eval_capacity_token_fraction", 1.0))
        if fraction < 1.0:  # then the capacity binds, and transformers leaves pads out of it
            raise ConversionError(
                f"config.json moe_eval_capacity_token_fraction={fraction} is not supported "
                "(only >= 1: archzoo's FFN does not see the padding its router skips)"
            )
        moe = {
            "kind": "moe",
            "n_experts": get(config, "num_experts", 128),
            "top_k": 2,
            "expert": "mlp",
            "activation": spec["ffn"]["activation"],
            "expert_bias": True,
            "router_bias": get(config, "router_bias", False),
            "router_fp32": True,
            "capacity": get(config, "expert_capacity", 64),
            "capacity_over": "batch",
            "eval_capacity_fraction": fraction,
            "output_dropout": float(get(config, "moe_token_dropout", 0.2)),
            "aux_loss_coef": 0.0,  # transformers adds none unless output_router_logits
        }
        decoder = spec.setdefault("decoder", {})
        for where, n, step in (
            (spec, get(config, "encoder_layers"), get(config, "encoder_sparse_step", 4)),
            (decoder, get(config, "decoder_layers"), get(config, "decoder_sparse_step", 4)),
        ):
            picked = [i for i in range(n) if step > 0 and (i + 1) % step == 0]
            where["layers"] = [{"select": picked, "ffn": dict(moe)}] if picked else []

    def import_state(
        self, src: TensorSource, config: dict[str, Any], names: Any, ctx: dict[str, Any]
    ) -> dict[str, Tensor]:
        """Per-expert fc1 / fc2 weights and biases stacked into one (E, ...) tensor each."""
        stack_numbered(src, EXPERT)
        return super().import_state(src, config, names, ctx)

    def export_state(self, *args: Any, **kwargs: Any) -> dict[str, Tensor]:
        """The stacked experts written back one expert at a time."""
        return split_numbered(super().export_state(*args, **kwargs), STACKED)

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """Experts, capacity and each stack's sparse step back from its routed layers."""
        decoder = spec.get("decoder") or {}
        enc, dec = spec.get("layers") or [], decoder.get("layers", spec.get("layers")) or []
        moe = (enc or dec or [{"ffn": {}}])[0]["ffn"]
        config.update(
            num_experts=moe.get("n_experts", 128),
            expert_capacity=moe.get("capacity", 64),
            router_bias=moe.get("router_bias", False),
            moe_eval_capacity_token_fraction=moe.get("eval_capacity_fraction", 1.0),
            moe_token_dropout=moe.get("output_dropout", 0.2),
            encoder_sparse_step=enc[0]["select"][0] + 1 if enc else 0,
            decoder_sparse_step=dec[0]["select"][0] + 1 if dec else 0,
        )
