"""ERNIE 4.5 MoE (Baidu): ERNIE 4.5's Llama layout (rotary on adjacent pairs) whose FFN on
the layers `moe_layer_start_index`..`moe_layer_end_index`, every `moe_layer_interval`-th,
is a mixture of SwiGLU experts: softmax over the experts (fp32 router), the top `moe_k`
chosen after adding a per-expert correction bias, their softmax weights renormalised, and
`moe_num_shared_experts` shared experts beside them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import parse_fields, spec_parts
from archzoo.specs.plan import layer_components, stack_config

from .common import decoder_tasks, lm_task, table
from .experts import GATE_UP_DOWN_PROJ
from .llama import ATTENTION_TENSORS, MLP_TENSORS, ROTARY_BUFFER, LlamaConverter
from .mixtral import ExpertsConverter, aux_loss_coef, aux_loss_config, without_ffn_bias

THETA = 500000.0
SCORE_BIAS_RULE = (  # (1, E), saved under moe_statics (transformers' own module: gate.moe_statics)
    "layers.{i}.mlp.moe_statics.e_score_correction_bias"
    "|layers.{i}.mlp.gate.moe_statics.e_score_correction_bias    SCORE_BIAS  flatten  tensor\n"
)  # Ernie4_5_MoeConfig's default_theta


class Ernie4_5_MoeConverter(
    ExpertsConverter, LlamaConverter, model_type="ernie4_5_moe", hf_prefix="Ernie4_5_Moe"
):
    per_expert = GATE_UP_DOWN_PROJ
    requires = {**LlamaConverter.requires, "use_bias": False}  # shared experts have no bias here
    fixed = {
        **LlamaConverter.fixed,
        **spec_parts(
            "ffn: {kind: moe, expert: glu, activation: swiglu, router: softmax_topk,"
            " choice_bias: true, normalize: true, router_fp32: true}"
        ),
    }
    fields = (
        *without_ffn_bias(LlamaConverter.fields),
        *parse_fields(
            """
            moe_num_experts|num_experts         ffn.n_experts       64
            moe_k|num_experts_per_tok           ffn.top_k           6
            moe_intermediate_size               ffn.d_expert        1536
            moe_num_shared_experts              ffn.n_shared        2
            """
        ),
    )
    tasks = {
        k: v
        for k, v in decoder_tasks("ForCausalLM", lm_task(True)).items()
        if k in ("Model", "ForCausalLM")
    }
    tensors = table(
        ATTENTION_TENSORS
        + MLP_TENSORS
        + """
        layers.{i}.mlp.gate                                 ROUTER
        layers.{i}.mlp.experts.gate_up_proj                 EXPERTS_IN      transpose   tensor
        layers.{i}.mlp.experts.down_proj                    EXPERTS_OUT     transpose   tensor
        layers.{i}.mlp.shared_experts.(gate_proj,up_proj)   SHARED_UP       fuse
        layers.{i}.mlp.shared_experts.down_proj             SHARED_DOWN
        """
        + SCORE_BIAS_RULE,
        prefixes=("model.", ""),
        ignore=ROTARY_BUFFER,
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Interleaved rotary; the dense layers outside the routed range; the router loss."""
        super().adjust(
            spec, config if "rope_parameters" in config else {"rope_theta": THETA, **config}
        )
        spec["position"]["interleaved"] = True
        aux_loss_coef(spec, config)
        n = spec["n_layers"]
        start, end = config.get("moe_layer_start_index", 1), config.get("moe_layer_end_index", -1)
        end = n - 1 if end == -1 else end
        every = config.get("moe_layer_interval", 1)
        dense = [i for i in range(n) if not ((i + 1) % every == 0 and start <= i <= end)]
        if dense:  # these layers keep a dense SwiGLU of intermediate_size
            spec["layers"] = [{"select": dense, "ffn": {"kind": "glu", "activation": "swiglu"}}]

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """The routed layers as one contiguous range (others read back as routed, so export's
        round trip names them), and the router loss."""
        super().adjust_config(config, spec)
        aux_loss_config(config, spec)
        layers = layer_components(stack_config(dict(spec), "decoder"))
        routed = [i for i, c in enumerate(layers) if c["ffn"]["kind"] == "moe"]
        config["moe_layer_interval"] = 1
        config["moe_layer_start_index"] = routed[0] if routed else len(layers)
        config["moe_layer_end_index"] = routed[-1] if routed else len(layers)
