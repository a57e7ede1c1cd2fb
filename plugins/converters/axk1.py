"""A.X-K1 (SK Telecom, `axk1`): DeepSeek-V3 (latent attention with a low-rank query, grouped
sigmoid routing with a correction bias and a shared expert, dense layers `mlp_layer_types`
names) with one more RMSNorm over each MoE block's output (moe's `output_norm`); none after
attention."""

from __future__ import annotations

from typing import Any

from .common import table, with_defaults
from .deepseek import MLA_TENSORS, MOE_TENSORS, DeepseekV3Converter
from .glm4_moe_lite import Glm4MoeLiteConverter
from .llama import MLP_TENSORS, ROTARY_BUFFER

TASKS = ("Model", "ForCausalLM", "ForSequenceClassification", "ForTokenClassification")


class Axk1Converter(Glm4MoeLiteConverter, model_type="axk1", hf_prefix="AXK1"):
    fields = with_defaults(  # AXK1Config's defaults where they differ from DeepSeek-V3's
        DeepseekV3Converter.fields,
        max_position_embeddings=32768,
        q_lora_rank=1536,
        n_routed_experts=192,
        n_group=8,
        topk_group=4,
    )
    tasks = {k: v for k, v in DeepseekV3Converter.tasks.items() if k in TASKS}
    tensors = table(  # the checkpoints keep the norm beside mlp (transformers moves it in)
        MLA_TENSORS
        + MLP_TENSORS
        + MOE_TENSORS
        + """
        layers.{i}.post_mlp_layernorm|layers.{i}.mlp.post_mlp_layernorm     MOE_OUT_NORM
        """,
        prefixes=("model.", ""),
        # the released checkpoints keep an unused one beside each dense MLP too
        ignore=(
            *ROTARY_BUFFER,
            *(f"layers.{{i}}.{m}post_mlp_layernorm.weight" for m in ("", "mlp.")),
        ),
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """GLM-4.7-Flash's dense layers and latent norms; the MoE blocks' output norm."""
        super().adjust(spec, config)
        spec["ffn"]["output_norm"] = True
