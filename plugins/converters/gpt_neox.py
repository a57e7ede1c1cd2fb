"""GPT-NeoX (Pythia): parallel residual, partial rotary, per-head fused QKV, untied head."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import Converter, Values, parse_fields, spec_parts

from .common import ACTIVATION, PAD, SIZES, decoder_tasks, lm_task, megatron_layer, table
from .rope import rope_config, rope_parameters


class GPTNeoXConverter(Converter, model_type="gpt_neox", hf_prefix="GPTNeoX", family="decoder"):
    fixed = spec_parts(
        "embedding: token, norm: layernorm, ffn: mlp",
        "attention: {kind: mha, fused_qkv: true}",
    )
    fields = (
        *SIZES,
        *parse_fields(
            """
            max_position_embeddings     max_len                             2048
            hidden_dropout              dropout                             0.0
            attention_dropout           attention_dropout                   0.0
            attention_bias              attention.bias,attention.out_bias   True
            use_parallel_residual       block                   True        BLOCK
            layer_norm_eps              norm.eps                            1e-5
            hidden_act                  ffn.activation          gelu        ACTIVATION
            """,
            ACTIVATION=ACTIVATION,
            BLOCK=Values({True: {"kind": "parallel", "branches_first": True}, False: "pre_ln"}),
        ),
        *PAD,
    )
    tasks = decoder_tasks("ForCausalLM", lm_task(False, "embed_out  LM_PROJ"))
    tensors = table(
        """
        embed_in                                    WORD
        final_layer_norm                            FINAL_NORM
        """
        + megatron_layer("layers.{i}", "attention"),
        prefixes=("gpt_neox.", ""),
        ignore=tuple(
            "layers.{i}.attention." + b for b in ("bias", "masked_bias", "rotary_emb.inv_freq")
        ),
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Rotary base and fraction, from transformers 4 or 5 keys."""
        spec["position"] = {"kind": "rotary", **rope_parameters(config)}

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        config.update(rope_config(spec["position"]))
