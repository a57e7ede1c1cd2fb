"""LFM2-MoE (Liquid AI, 2025): LFM2's short convolutions and attention layers, whose FFN is
a dense SwiGLU on the first `num_dense_layers` and a mixture of SwiGLU experts after them:
sigmoid scores, the top k chosen with a per-expert bias (`expert_bias`), renormalised and
scaled by `routed_scaling_factor`. Checkpoints keep one w1/w3/w2 per expert."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import ConversionError, Field, parse_fields, spec_parts
from archzoo.specs.plan import layer_components, stack_config

from .common import HEADLESS, PAD, SIZES, layer_overrides, lm_task, table
from .experts import PerExpert
from .lfm2 import LFM2_TENSORS, Lfm2Converter
from .mixtral import ExpertsConverter

MOE_TENSORS = """
        layers.{i}.feed_forward.gate                            ROUTER
        layers.{i}.feed_forward.expert_bias                     SCORE_BIAS  tensor
        layers.{i}.mlp.experts.gate_up_proj                     EXPERTS_IN  transpose   tensor
        layers.{i}.mlp.experts.down_proj                        EXPERTS_OUT transpose   tensor
"""


class Lfm2MoeConverter(ExpertsConverter, Lfm2Converter, model_type="lfm2_moe", hf_prefix="Lfm2Moe"):
    per_expert = PerExpert.under("feed_forward.experts.{e}", "w1", "w3", "w2")
    fixed = {
        **Lfm2Converter.fixed,
        **spec_parts(
            "ffn: {kind: moe, expert: glu, activation: swiglu, router: sigmoid, aux_loss_coef: 0.0}"
        ),
    }
    fields = (
        *SIZES,
        *parse_fields(
            """
            max_position_embeddings     max_len                 128000
            norm_eps                    norm.eps                1e-5
            conv_bias                   attention.bias          False
            conv_L_cache                attention.conv_kernel   3
            num_experts                 ffn.n_experts           32
            num_experts_per_tok         ffn.top_k               4
            moe_intermediate_size       ffn.d_expert            1792
            norm_topk_prob              ffn.normalize           True
            routed_scaling_factor       ffn.routed_scale        1.0
            use_expert_bias             ffn.choice_bias         True
            """
        ),
        Field("head_dim", "head_dim", lambda c: c["hidden_size"] // c["num_attention_heads"]),
        *PAD,
    )
    tasks = {"Model": HEADLESS, "ForCausalLM": lm_task(True)}
    tensors = table(LFM2_TENSORS + MOE_TENSORS, prefixes=("model.", ""))

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """LFM2's layers, the dense FFN width as is, and a dense SwiGLU on the first
        `num_dense_layers` layers (attention and dense layers may coincide)."""
        super().adjust(spec, config)
        spec["d_ff"] = config["intermediate_size"]  # no auto-adjusted width here
        n = spec["n_layers"]
        attends = set(spec.pop("layers", [{"select": []}])[0]["select"])
        attention = {
            "kind": "mha",
            "fused_qkv": False,
            "bias": False,
            "qk_norm": "head",
            "n_kv_heads": config.get("num_key_value_heads") or config["num_attention_heads"],
        }
        dense = set(range(min(n, int(config.get("num_dense_layers", 2)))))
        glu = {"kind": "glu", "activation": "swiglu", "bias": False}
        layer_overrides(spec, attention, attends, glu, dense)

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """LFM2's `layer_types` and heads, and `num_dense_layers` (a prefix of the layers)."""
        super().adjust_config(config, spec)
        config.pop("block_auto_adjust_ff_dim", None)
        layers = layer_components(stack_config(dict(spec), "decoder"))
        dense = [i for i, c in enumerate(layers) if c["ffn"]["kind"] != "moe"]
        if dense != list(range(len(dense))):
            raise ConversionError(
                f"the dense FFN layers {dense} are not the first layers, the only pattern "
                "LFM2-MoE's num_dense_layers can say"
            )
        config["num_dense_layers"] = len(dense)
