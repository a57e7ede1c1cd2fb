"""StarCoder2: Llama's tensor layout with LayerNorm, biases everywhere (`use_bias`), a plain
GELU MLP (c_fc, c_proj), GQA, rotary, and one causal sliding window for every layer."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import parse_fields, spec_parts

from .common import ACTIVATION, PAD, SIZES, decoder_tasks, lm_task, table
from .llama import ATTENTION_TENSORS, ROTARY_BUFFER, LlamaConverter
from .rope import rope_parameters


class Starcoder2Converter(LlamaConverter, model_type="starcoder2", hf_prefix="Starcoder2"):
    requires = {}
    fixed = spec_parts(
        "embedding: token, block: pre_ln, norm: layernorm",
        "attention: {kind: mha, fused_qkv: false}, ffn: mlp",
    )
    fields = (
        *SIZES,
        *parse_fields(
            """
            max_position_embeddings     max_len                             4096
            attention_dropout           attention_dropout                   0.0
            residual_dropout            dropout                             0.0
            embedding_dropout           embedding.dropout                   0.0
            use_bias                    attention.bias,ffn.bias             True
            norm_epsilon                norm.eps                            1e-5
            hidden_act                  ffn.activation      gelu_pytorch_tanh   ACTIVATION
            """,
            ACTIVATION=ACTIVATION,
        ),
        *(f for f in LlamaConverter.fields if f.hf in ("head_dim", "num_key_value_heads")),
        *PAD,
    )
    tasks = decoder_tasks("ForCausalLM", lm_task(True), token="score")
    tensors = table(
        ATTENTION_TENSORS + "layers.{i}.mlp.(c_fc,c_proj)  FC_IN,FC_OUT\n",
        prefixes=("model.", ""),
        ignore=ROTARY_BUFFER,
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Rotary from transformers 4 or 5 keys; `sliding_window` keys (itself included) for
        every layer when set."""
        spec["position"] = {"kind": "rotary", **rope_parameters(config)}
        window = config.get("sliding_window")
        if window is not None:
            spec["attention"] = {**spec["attention"], "kind": "local", "window": int(window)}

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """Rotary as Llama's, and a local attention's window as `sliding_window`."""
        super().adjust_config(config, spec)
        attention = spec["attention"]
        config["sliding_window"] = attention["window"] if attention["kind"] == "local" else None
