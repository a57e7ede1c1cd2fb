"""JetMoE: a mixture of attention heads (`moa`: top-k of num_local_experts query/output
projection pairs over one shared k|v projection of num_key_value_heads x kv_channels) and a
mixture of GLU experts with one output bias, both routed by top-k logits then a softmax
over those k. Its blocks' RMSNorms keep transformers' eps 1e-6 whatever rms_norm_eps says
(only the final norm reads it); the routers share one load-balancing loss."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import Converter, Values, parse_fields, spec_parts

from .common import PAD, decoder_tasks, lm_task, table
from .rope import rope_config, rope_parameters

BLOCK_NORM_EPS = 1e-6  # JetMoeDecoderLayer builds its two norms without an eps
GATED = Values({"silu": "swiglu", "swish": "swiglu", "gelu": "geglu", "relu": "reglu"})


class JetMoeConverter(Converter, model_type="jetmoe", hf_prefix="JetMoe", family="decoder"):
    fixed = spec_parts(
        "dropout: 0.0, embedding: token, block: pre_ln, norm: rmsnorm",
        "attention: {kind: moa, out_bias: true}",
        "ffn: {kind: moe, expert: glu, router: topk_softmax, output_bias: true}",
    )
    fields = (
        *parse_fields(
            """
            vocab_size                  vocab_size
            hidden_size                 d_model
            num_hidden_layers           n_layers
            intermediate_size           d_ff
            kv_channels                 head_dim                        128
            num_key_value_heads         attention.n_kv_heads            16
            num_local_experts           ffn.n_experts,attention.n_experts   8
            num_experts_per_tok         ffn.top_k,attention.top_k       2
            max_position_embeddings     max_len                         4096
            attention_dropout           attention_dropout               0.0
            rms_norm_eps                norm.eps                        1e-6
            activation_function         ffn.activation                  silu    GATED
            """,
            GATED=GATED,
        ),
        *PAD,
    )
    tasks = {
        k: v
        for k, v in decoder_tasks("ForCausalLM", lm_task(True), token="score").items()
        if k in ("Model", "ForCausalLM", "ForSequenceClassification")
    }
    tensors = table(
        """
        embed_tokens                                        WORD
        layers.{i}.(input_layernorm,post_attention_layernorm)   ATTN_NORM,FFN_NORM
        norm                                                FINAL_NORM
        layers.{i}.self_attention.kv_proj                   MOA_KV
        layers.{i}.self_attention.experts.router.layer      MOA_ROUTER
        layers.{i}.self_attention.experts.input_linear.weight   MOA_Q   transpose   tensor
        layers.{i}.self_attention.experts.output_linear.weight  MOA_OUT transpose   tensor
        layers.{i}.self_attention.experts.bias              MOA_BIAS    tensor
        layers.{i}.mlp.router.layer                         ROUTER
        layers.{i}.mlp.input_linear.weight                  EXPERTS_IN  transpose   tensor
        layers.{i}.mlp.output_linear.weight                 EXPERTS_OUT transpose   tensor
        layers.{i}.mlp.bias                                 EXPERTS_SUM_BIAS    tensor
        """,
        prefixes=("model.", ""),
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Heads from kv heads x top-k, rotary, block norms at 1e-6, the router loss's weight
        (on only with output_router_logits, as transformers adds it)."""
        spec["n_heads"] = spec["attention"]["n_kv_heads"] * spec["attention"]["top_k"]
        spec["position"] = {"kind": "rotary", **rope_parameters(config)}
        if spec["norm"]["eps"] != BLOCK_NORM_EPS:
            spec["layers"] = [{"select": "all", "norm": {**spec["norm"], "eps": BLOCK_NORM_EPS}}]
        on = bool(config.get("output_router_logits"))
        coef = float(config.get("aux_loss_coef", 0.01)) if on else 0.0
        spec["attention"]["aux_loss_coef"] = spec["ffn"]["aux_loss_coef"] = coef

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        config.update(rope_config(spec["position"]))
        coef = float(spec["ffn"].get("aux_loss_coef") or 0.0)
        config["output_router_logits"] = coef > 0
        if coef > 0:
            config["aux_loss_coef"] = coef
