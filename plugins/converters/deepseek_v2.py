"""DeepSeek-V2: DeepSeek-V3's latent attention (rotary on adjacent pairs, as its complex
form) with softmax-routed experts: the top `num_experts_per_tok` scores (of the best
`topk_group` groups by their best expert with `group_limited_greedy`), not renormalised,
times `routed_scaling_factor`, beside `n_shared_experts` shared ones."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import ConversionError, spec_parts

from .common import with_defaults
from .deepseek import DeepseekV3Converter

ROUTING = ("n_group", "topk_group", "norm_topk_prob")


class DeepseekV2Converter(DeepseekV3Converter, model_type="deepseek_v2", hf_prefix="DeepseekV2"):
    requires = {**DeepseekV3Converter.requires, "mlp_bias": False}
    fixed = {
        **DeepseekV3Converter.fixed,
        **spec_parts(
            "ffn: {kind: moe, expert: glu, activation: swiglu, router: softmax_topk,"
            " normalize: false, aux_loss_coef: 0.0, router_fp32: true, fp32_weights: true}"
        ),
    }
    fields = with_defaults(  # DeepseekV2Config's defaults where they differ from V3's
        (f for f in DeepseekV3Converter.fields if f.hf not in ROUTING),
        max_position_embeddings=2048,
        q_lora_rank=1536,
        n_routed_experts=64,
        n_shared_experts=2,
        moe_intermediate_size=1407,
        routed_scaling_factor=1.0,
    )
    tasks = {
        k: v
        for k, v in DeepseekV3Converter.tasks.items()
        if k in ("Model", "ForCausalLM", "ForSequenceClassification")
    }

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """V3's rotary, scale and dense layers; greedy or group-limited greedy choice."""
        super().adjust(spec, config)
        if "q_lora_rank" in config and config["q_lora_rank"] is None:  # stated: a plain q
            spec["attention"]["q_lora_rank"] = None  # (absent: the default 1536)
        method = config.get("topk_method") or "greedy"
        if method == "group_limited_greedy":
            spec["ffn"]["n_groups"] = int(config["n_group"])
            spec["ffn"]["topk_groups"] = int(config["topk_group"])
            spec["ffn"]["group_top"] = 1  # a group scores its best expert
        elif method != "greedy":
            raise ConversionError(
                f"config.json topk_method={method!r} is not supported; "
                "supported: greedy, group_limited_greedy"
            )

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """V3's, with the choice method instead of V3's routing keys."""
        super().adjust_config(config, spec)
        ffn = next((c for c in [spec["ffn"]] if c["kind"] == "moe"), {})
        groups = ffn.get("n_groups", 1)
        config["topk_method"] = "group_limited_greedy" if groups > 1 else "greedy"
        config["n_group"] = groups if groups > 1 else None
        config["topk_group"] = ffn.get("topk_groups") if groups > 1 else None
        config.pop("rope_interleave", None)
