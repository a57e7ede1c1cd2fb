"""Sarvam-M MoE (`sarvam_moe`, sarvamai/sarvam-30b): GLM-4.5's model (transformers runs it
with Glm4MoeForCausalLM) saved under Sarvam's own tensor names: one fused [q | k | v]
projection (`query_key_value`), `dense` for the output, `query_layernorm` / `key_layernorm`
for the per-head QK norms, `word_embeddings`, the router's bias as `expert_bias`; its config
class defaults to QK norms and rotary on the whole head (GLM-4.5's: half)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from archzoo.parts.converter import spec_parts

from .common import table
from .glm4_moe import Glm4MoeConverter
from .llama import MLP_TENSORS, ROTARY_BUFFER

SARVAM_TENSORS = """
        word_embeddings|embed_tokens                    WORD  # a headless save keeps embed_tokens
        layers.{i}.input_layernorm                      ATTN_NORM
        layers.{i}.attention.query_key_value            QKV
        layers.{i}.attention.(query_layernorm,key_layernorm)    Q_NORM,K_NORM
        layers.{i}.attention.dense                      ATTN_OUT
        layers.{i}.post_attention_layernorm             FFN_NORM
        norm                                            FINAL_NORM
        layers.{i}.mlp.gate                             ROUTER
        layers.{i}.mlp.gate.expert_bias                 SCORE_BIAS      tensor
        layers.{i}.mlp.experts.gate_up_proj             EXPERTS_IN      transpose   tensor
        layers.{i}.mlp.experts.down_proj                EXPERTS_OUT     transpose   tensor
        layers.{i}.mlp.shared_experts.(gate_proj,up_proj)   SHARED_UP   fuse
        layers.{i}.mlp.shared_experts.down_proj         SHARED_DOWN
"""
# SarvamMoEConfig's attribute_map: the published config.json's names for GLM-4.5's keys
RENAMED = {
    "num_experts": "n_routed_experts",
    "num_shared_experts": "n_shared_experts",
    "use_qkv_bias": "attention_bias",
}
# SarvamMoEConfig's defaults where they differ from Glm4MoeConfig's, for absent keys
DEFAULTS = {
    "partial_rotary_factor": 1.0,
    "rope_theta": 8e6,
    "use_qk_norm": True,
    "routed_scaling_factor": 2.5,
    "moe_intermediate_size": 1024,
    "rms_norm_eps": 1e-6,
    "num_key_value_heads": 4,
}


class SarvamMoeConverter(Glm4MoeConverter, model_type="sarvam_moe", hf_prefix="Glm4Moe"):
    layout_of = "glm4_moe"  # its names for GLM-4.5's layout: exports as it when imported from it
    fixed = {
        **Glm4MoeConverter.fixed,
        **spec_parts("attention: {kind: mha, fused_qkv: true, out_bias: false}"),
    }
    tensors = table(SARVAM_TENSORS + MLP_TENSORS, prefixes=("model.", ""), ignore=ROTARY_BUFFER)

    def to_spec(self, config: dict[str, Any], tensor_names: Sequence[str] = ()) -> dict[str, Any]:
        """GLM-4.5's table over the config with Sarvam's key names and defaults."""
        config = {**DEFAULTS, **{k: v for k, v in config.items() if v is not None}}
        for theirs, ours in RENAMED.items():
            if theirs in config and ours not in config:
                config[ours] = config.pop(theirs)
        return super().to_spec(config, tensor_names)
