"""ModernBERT: a pre-LN encoder without biases, rotary positions with a base for the global
layers and one for the sliding-window layers (every `global_attn_every_n_layers`-th layer,
from the first, is global; the others see `local_attention // 2` keys each side), GeGLU
(`Wi` holds [input | gate]), no norm before the first layer's attention, and heads that
read through dense + activation + norm."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.component import config_defaults
from archzoo.parts.converter import (
    ConversionError,
    Converter,
    Field,
    Values,
    get,
    parse_fields,
    spec_parts,
)
from archzoo.specs.plan import layer_components, stack_config

from ..position.rotary import RotaryPosition
from .common import ACTIVATION, HEADLESS, PAD, SIZES, table, task, tie
from .gemma import GATED
from .gemma2 import sliding_config, sliding_layers
from .gemma3 import gemma3_rotary
from .rope import rope_config

BASES = (160_000.0, 10_000.0)  # transformers' global and local rotary bases
ROTATE = {"rotate_fp32": True, "round_cos_sin": True}
THETAS = ("global_rope_theta", "local_rope_theta")  # their transformers-4 keys
FIRST_LAYER = {"select": [0], "block": {"kind": "pre_ln", "attention_norm": False}}
POOLED = "kind: {}, pooler: true, pooler_norm: true"  # ModernBertPredictionHead first
HEAD = "head.(dense,norm)  HEAD_POOLER,HEAD_POOLER_NORM\n"
POOLER = (
    Field("classifier_activation", "head.pooler_activation", "gelu", ACTIVATION),
    Field("classifier_bias", "head.pooler_bias", False),
)
DROPOUT = Field("classifier_dropout", "head.dropout", 0.0)
POOLING = Field("classifier_pooling", "head.pooling", "cls", Values({"cls": "cls", "mean": "mean"}))


class ModernBertConverter(
    Converter,
    model_type="modernbert",
    hf_prefix="ModernBert",
    family="encoder",
    default_task="ForMaskedLM",
):
    fixed = spec_parts(
        "dropout: 0.0, block: pre_ln, norm: layernorm, ffn: glu",
        "embedding: {kind: token, norm: true}, attention: {kind: mha, fused_qkv: true}",
    )
    fields = (
        *SIZES,
        *parse_fields(
            """
            max_position_embeddings     max_len                 8192
            norm_eps                    norm.eps                1e-5
            norm_bias                   norm.bias               False
            attention_bias              attention.bias          False
            attention_dropout           attention_dropout       0.0
            embedding_dropout           embedding.dropout       0.0
            mlp_bias                    ffn.bias                False
            mlp_dropout                 ffn.inner_dropout       0.0
            hidden_activation           ffn.activation          gelu    GATED
            """,
            GATED=GATED,
        ),
        *PAD,
    )
    tasks = {
        "Model": HEADLESS,
        "ForMaskedLM": task(
            "kind: mlm",
            "head.(dense,norm)  MLM_DENSE,MLM_NORM\ndecoder  MLM_DECODER\ndecoder.bias  MLM_BIAS  tensor",
            fields=(
                Field("classifier_activation", "head.activation", "gelu", ACTIVATION),
                Field("classifier_bias", "head.dense_bias", False),
                Field("decoder_bias", "head.decoder_bias", True),
                tie(True),
            ),
        ),
        "ForSequenceClassification": task(
            POOLED.format("classifier"),
            HEAD + "classifier  CLASSIFIER",
            labels=True,
            fields=(*POOLER, DROPOUT, POOLING),
        ),
        "ForTokenClassification": task(
            POOLED.format("token_classifier"),
            HEAD + "classifier  CLASSIFIER",
            labels=True,
            fields=(*POOLER, DROPOUT),
        ),
        "ForQuestionAnswering": task(
            POOLED.format("question_answering"), HEAD + "classifier  QA", fields=POOLER
        ),
        "ForMultipleChoice": task(
            POOLED.format("multiple_choice"),
            HEAD + "classifier  CLASSIFIER",
            fields=(*POOLER, DROPOUT, POOLING),
        ),
    }
    window_beyond_half = 1  # archzoo's window: local_attention // 2 + this

    tensors = table(
        """
        embeddings.tok_embeddings           WORD
        embeddings.norm                     EMBED_NORM
        layers.{i}.attn_norm                ATTN_NORM
        layers.{i}.attn.(Wqkv,Wo)           QKV,ATTN_OUT
        layers.{i}.mlp_norm                 FFN_NORM
        layers.{i}.mlp.Wi                   GATE,UP     split   # [input | gate]
        layers.{i}.mlp.Wo                   DOWN
        final_norm                          FINAL_NORM
        """,
        prefixes=("model.", ""),
        stacks={"encoder": {}},
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """The two rotary bases, the sliding-window layers and the first layer's missing norm."""
        if config.get("sparse_prediction"):
            raise ConversionError(
                "config.json sparse_prediction=true is not supported (it returns logits for "
                "the labelled tokens only); set it to false to import"
            )
        glob, local = gemma3_rotary(config, THETAS, BASES)
        # apply_rotary_pos_emb rotates q and k in float32, by cos/sin rounded to q's dtype
        spec["position"] = {"kind": "rotary", **glob, **ROTATE}
        n, every = spec["n_layers"], int(config.get("global_attn_every_n_layers") or 3)
        kinds = config.get("layer_types") or [
            "sliding_attention" if i % every else "full_attention" for i in range(n)
        ]
        # HF keeps |q - k| <= local_attention // 2; archzoo's bidirectional window |q - k| < w
        # (a causal one, the decoder's: q - k < local_attention // 2)
        window = int(get(config, "local_attention", 128)) // 2 + self.window_beyond_half
        local = {"kind": "rotary", **config_defaults(RotaryPosition), **local, **ROTATE}
        types = {**config, "layer_types": kinds, "sliding_window": window}
        sliding_layers(spec, types, every, local_position=local)
        spec["layers"] = [*spec.get("layers", []), dict(FIRST_LAYER)]

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """`layer_types`, `local_attention` and each layer type's rotary parameters."""
        sliding_config(config, spec)
        window = config.pop("sliding_window")  # ModernBertConfig reads it as a half window
        config["local_attention"] = 2 * (window - self.window_beyond_half) if window else 128
        layers = layer_components(stack_config(dict(spec), self.family))
        by_type = dict(zip(config["layer_types"], (c["position"] for c in layers), strict=True))
        config["rope_parameters"] = {
            kind: rope_config(position).get("rope_parameters") for kind, position in by_type.items()
        }
