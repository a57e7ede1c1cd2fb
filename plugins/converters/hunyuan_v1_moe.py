"""HunYuan MoE (Tencent Hunyuan-A13B): HunYuan dense's attention (QK RMSNorm after the
rotation) with a mixture of SwiGLU experts of `intermediate_size` (softmax over the experts,
top `moe_topk` renormalised, router in fp32) beside one shared SwiGLU of the same width."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import ConversionError, spec_parts

from .common import table
from .experts import GATE_UP_DOWN_PROJ
from .hunyuan_v1_dense import HunYuanDenseV1Converter
from .llama import ATTENTION_TENSORS, ROTARY_BUFFER
from .mixtral import ExpertsConverter, aux_loss_coef, aux_loss_config, without_ffn_bias

QK_NORM_TENSORS = "layers.{i}.self_attn.(query_layernorm,key_layernorm)    Q_NORM,K_NORM\n"


def _one(config: dict[str, Any], key: str) -> int:
    """An int setting that transformers allows per layer: refused unless all layers agree."""
    value = config.get(key, 1)
    if isinstance(value, list):
        if len(set(value)) != 1:
            raise ConversionError(f"config.json {key}={value!r}: a different value per layer")
        value = value[0]
    return int(value)


class HunYuanMoEV1Converter(
    ExpertsConverter, HunYuanDenseV1Converter, model_type="hunyuan_v1_moe", hf_prefix="HunYuanMoEV1"
):
    per_expert = GATE_UP_DOWN_PROJ
    fixed = {
        **HunYuanDenseV1Converter.fixed,
        **spec_parts(
            "ffn: {kind: moe, expert: glu, activation: swiglu, router: softmax_topk,"
            " normalize: true, n_shared: 1, router_fp32: true, fp32_weights: true}"
        ),
    }
    fields = without_ffn_bias(HunYuanDenseV1Converter.fields)
    tensors = table(
        ATTENTION_TENSORS
        + QK_NORM_TENSORS
        + """
        layers.{i}.mlp.gate.wg                              ROUTER
        layers.{i}.mlp.experts.gate_up_proj                 EXPERTS_IN      transpose   tensor
        layers.{i}.mlp.experts.down_proj                    EXPERTS_OUT     transpose   tensor
        layers.{i}.mlp.shared_mlp.(gate_proj,up_proj)       SHARED_UP       fuse
        layers.{i}.mlp.shared_mlp.down_proj                 SHARED_DOWN
        """,
        prefixes=("model.", ""),
        ignore=ROTARY_BUFFER,
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """HunYuan's rotary; the expert count and top-k (one value for every layer)."""
        super().adjust(spec, config)
        spec["ffn"] = {
            **spec["ffn"],
            "n_experts": _one(config, "num_experts"),
            "top_k": _one(config, "moe_topk"),
        }
        aux_loss_coef(spec, config)

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        super().adjust_config(config, spec)
        config["num_experts"], config["moe_topk"] = spec["ffn"]["n_experts"], spec["ffn"]["top_k"]
        aux_loss_config(config, spec)
