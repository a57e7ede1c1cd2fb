"""Qwen3.5-MoE, text only (`qwen3_5_moe_text`): Qwen3-Next's layers with Gated DeltaNet's
projections kept apart (in_proj_qkv, in_proj_z, in_proj_b, in_proj_a: archzoo's own
layout, so nothing is regrouped) and experts on every layer (top-k renormalised)."""

from __future__ import annotations

from typing import Any

from archzoo.parts.converter import parse_fields

from .common import HEADLESS, PAD, SIZES, lm_task
from .mixtral import ExpertsConverter
from .qwen3_next import MIXER_FIELDS, Qwen3NextConverter


class Qwen3_5MoeTextConverter(
    Qwen3NextConverter, model_type="qwen3_5_moe_text", hf_prefix="Qwen3_5Moe"
):
    fields = (
        *(f for f in SIZES if f.hf != "intermediate_size"),
        *MIXER_FIELDS,
        *parse_fields(
            """
            num_experts                 ffn.n_experts                   256
            num_experts_per_tok         ffn.top_k                       8
            moe_intermediate_size       ffn.d_expert                    512
            shared_expert_intermediate_size     ffn.d_shared            512
            head_dim                    head_dim                        256
            """
        ),
        *PAD,
    )
    tasks = {"ForCausalLM": lm_task(False), "TextModel": HEADLESS}  # Model: the multimodal one

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Qwen3-Next's, with experts on every layer (no mlp_only_layers here)."""
        super().adjust(spec, {**config, "mlp_only_layers": [], "decoder_sparse_step": 1})
        spec["ffn"]["normalize"] = True

    def adjust_config(self, config: dict[str, Any], spec: Any) -> None:
        super().adjust_config(config, spec)
        for key in ("mlp_only_layers", "decoder_sparse_step"):
            config.pop(key, None)

    def import_state(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return ExpertsConverter.import_state(self, *args, **kwargs)  # nothing to regroup

    def export_state(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return ExpertsConverter.export_state(self, *args, **kwargs)
