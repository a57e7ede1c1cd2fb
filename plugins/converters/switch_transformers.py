"""Switch Transformers (Fedus et al., 2021): T5's layout whose FFN is, every
`num_layers / num_sparse_*_layers`-th layer from the second, a mixture of ReLU experts with
top-1 softmax routing (the winner's probability as its weight) and a fixed expert capacity
per row (tokens past it skip the FFN)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from torch import Tensor

from archzoo.parts.converter import TensorSource, get

from .common import HEADLESS, lm_task, table, task
from .experts import split_numbered, stack_numbered
from .t5 import T5Converter

EXPERT = re.compile(r"(.*\.mlp\.experts\.)expert_(\d+)\.(wi\.weight|wo\.weight)$")
STACKED = re.compile(r"(.*\.mlp\.experts\.)(wi\.weight|wo\.weight)$")


class SwitchTransformersConverter(
    T5Converter, model_type="switch_transformers", hf_prefix="SwitchTransformers"
):
    fields = tuple(f for f in T5Converter.fields if f.hf != "feed_forward_proj")
    tasks = {
        "Model": HEADLESS,
        "ForConditionalGeneration": lm_task(True),
        "EncoderModel": task("kind: none", family="encoder"),
    }
    tensors = table(
        """
        shared|{s}.embed_tokens                             WORD
        {s}.block.0.layer.0.SelfAttention.relative_attention_bias  POSITION
        {s}.block.{i}.layer.0.SelfAttention.(q,k,v,o)       Q,K,V,ATTN_OUT
        {s}.block.{i}.layer.1.EncDecAttention.(q,k,v,o)     CROSS_Q,CROSS_K,CROSS_V,CROSS_OUT
        {s}.block.{i}.layer.(0,1,{ffn}).layer_norm          ATTN_NORM,CROSS_NORM,FFN_NORM
        {s}.block.{i}.layer.{ffn}.mlp.(wi,wo)               FC_IN,FC_OUT
        {s}.block.{i}.layer.{ffn}.mlp.router.classifier     ROUTER
        {s}.block.{i}.layer.{ffn}.mlp.experts.wi.weight     EXPERTS_IN      transpose   tensor
        {s}.block.{i}.layer.{ffn}.mlp.experts.wo.weight     EXPERTS_OUT     transpose   tensor
        {s}.final_layer_norm                                FINAL_NORM
        """,
        prefixes=("",),
        stacks={"encoder": {"s": "encoder", "ffn": "1"}, "decoder": {"s": "decoder", "ffn": "2"}},
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Dense ReLU FFNs, the routed ones on each stack's sparse layers, the head's scale."""
        super().adjust(spec, config)
        act = get(config, "dense_act_fn", "relu")
        spec["ffn"] = {"kind": "mlp", "activation": act, "bias": False}
        moe = {
            "kind": "moe",
            "n_experts": get(config, "num_experts", 8),
            "top_k": 1,
            "expert": "mlp",
            "activation": act,
            "router": "softmax_topk",
            "normalize": False,
            "router_bias": get(config, "router_bias", False),
            "router_fp32": True,
            "capacity": get(config, "expert_capacity", 64),
            "jitter": float(get(config, "router_jitter_noise", 0.01)),
            "aux_loss_coef": 0.0,
        }
        n_enc = get(config, "num_layers")
        n_dec = get(config, "num_decoder_layers", n_enc)
        stacks = [(spec, n_enc, get(config, "num_sparse_encoder_layers", 3))]
        if spec["family"] == "encoder-decoder":
            decoder = spec.setdefault("decoder", {})
            stacks.append((decoder, n_dec, get(config, "num_sparse_decoder_layers", 3)))
        for where, n, sparse in stacks:
            step = n // sparse if sparse > 0 else n
            picked = [i for i in range(n) if step > 0 and (i % step == 1 or step == 1)]
            where["layers"] = [{"select": picked, "ffn": dict(moe)}] if picked else []

    def import_state(
        self, src: TensorSource, config: dict[str, Any], names: Any, ctx: dict[str, Any]
    ) -> dict[str, Tensor]:
        """Per-expert wi / wo stacked into one (E, ...) tensor per layer and projection."""
        stack_numbered(src, EXPERT)
        return super().import_state(src, config, names, ctx)

    def export_state(self, *args: Any, **kwargs: Any) -> dict[str, Tensor]:
        """The stacked experts written back one expert at a time."""
        return split_numbered(super().export_state(*args, **kwargs), STACKED)

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """Expert count, capacity and the sparse layers' spacing back from the layers."""
        layers = spec.get("layers") or []
        moe = layers[0]["ffn"] if layers else {}
        config.update(
            num_experts=moe.get("n_experts", 8),
            expert_capacity=moe.get("capacity", 64),
            router_bias=moe.get("router_bias", False),
            dense_act_fn=spec["ffn"].get("activation", "relu"),
        )
        decoder = spec.get("decoder") or {}
        for key, section in (
            ("num_sparse_encoder_layers", layers),
            ("num_sparse_decoder_layers", decoder.get("layers", layers)),
        ):
            config[key] = len(section[0]["select"]) if section else 0
