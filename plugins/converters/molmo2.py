"""Molmo2's language model (`molmo2_text`, Ai2 2025; transformers has it headless only):
Llama's weights, a QK RMSNorm per head (`qwen3`) or over all heads (`olmo`), norms before or
(`norm_after`) after each sublayer, a token table of vocab_size + additional_vocab_size rows."""

from __future__ import annotations

from typing import Any

from archzoo.parts.converter import ConversionError, Values, parse_fields, spec_parts
from archzoo.parts.hf_tensors import TensorTable, parse_rules

from .common import HEADLESS, PAD, PATHS, SIZES
from .llama import LlamaConverter
from .qwen import QK_NORM_TENSORS

QK_NORM = Values({"qwen3": "head", "olmo": "full"})
NORM_AFTER = Values({False: "pre_ln", True: "res_post_ln"})  # input_layernorm: ATTN_NORM both
ATTENTION = "attention: {kind: mha, fused_qkv: true, out_bias: false}"
FFN = "ffn: {kind: glu, activation: swiglu, bias: false}"


class Molmo2TextConverter(
    LlamaConverter, model_type="molmo2_text", hf_prefix="Molmo2", default_task="TextModel"
):
    fields = (
        *SIZES,
        *parse_fields(
            """
            max_position_embeddings  max_len               36864
            attention_dropout        attention_dropout     0.0
            attention_bias           attention.bias        False
            rms_norm_eps             norm.eps              1e-6
            head_dim                 head_dim              128
            num_key_value_heads      attention.n_kv_heads  8
            qk_norm_type             attention.qk_norm     qwen3   QK_NORM
            norm_after               block                 False   NORM_AFTER
            """,
            QK_NORM=QK_NORM,
            NORM_AFTER=NORM_AFTER,
        ),
        *PAD,
    )
    fixed, tasks = {**LlamaConverter.fixed, **spec_parts(ATTENTION, FFN)}, {"TextModel": HEADLESS}
    # the checkpoint's own names: two token tables (transformers saves the joined table as
    # two equal halves; whole tensors, no .weight), q|k|v in one projection, [up | gate] in one
    tensors = TensorTable(
        parse_rules(
            """
            wte.(embedding,new_embedding)   WORD_TABLE  fuse    tensor
            layers.{i}.(attn_norm,ff_norm)  ATTN_NORM,FFN_NORM
            layers.{i}.self_attn.att_proj   QKV
            layers.{i}.self_attn.attn_out   ATTN_OUT
            layers.{i}.mlp.ff_proj          UP,GATE     split
            layers.{i}.mlp.ff_out           DOWN
            norm                            FINAL_NORM
            """
            + QK_NORM_TENSORS,
            {**PATHS, "WORD_TABLE": PATHS["WORD"] + ".weight"},
        ),
        ("model.", ""),
        {"decoder": {}},
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Rotary (scaled on every layer or none), and the extra token rows in the table."""
        super().adjust(spec, config)
        scaled, every = config.get("rope_scaling_layers"), [*range(spec["n_layers"])]
        if "scaling" in spec["position"] and scaled is not None and sorted(scaled) != every:
            raise ConversionError(
                f"config.json rope_scaling_layers={scaled!r}: RoPE scaled on some layers only "
                "(a per-layer choice between a scaled and an unscaled rotary) is not supported"
            )
        spec["vocab_size"] += int(config.get("additional_vocab_size", 128) or 0)

    def adjust_config(self, config: dict[str, Any], spec: Any) -> None:
        """Every row of the token table under `vocab_size`; the rotary scaled on every layer."""
        super().adjust_config(config, spec)
        config["additional_vocab_size"] = 0
        config["rope_scaling_layers"] = None
