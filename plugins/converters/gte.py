"""GTE (Alibaba's gte-v1.5 / gte-multilingual): a post-LN encoder with rotary positions
(base 160,000 by default), biased q/k/v/o, a GeGLU whose down projection alone has a bias,
an embedding norm over tokens (+ token types where type_vocab_size > 0), BERT's heads."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import Converter, parse_fields, spec_parts

from .bert import POOLER
from .common import HEADLESS, PAD, SIZES, table, task, tie, token_classifier
from .gemma import GATED
from .rope import rope_config, rope_parameters

THETA = 160_000.0  # GteConfig.default_theta


class GteConverter(Converter, model_type="gte", hf_prefix="Gte", family="encoder"):
    fixed = spec_parts(
        "block: post_ln, norm: layernorm, embedding: {kind: token, norm: true}",
        "attention: {kind: mha, fused_qkv: true, bias: true}",
        "ffn: {kind: glu, bias: false, down_bias: true}",
    )
    fields = (
        *SIZES,
        *parse_fields(
            """
            max_position_embeddings         max_len                     8192
            hidden_dropout_prob             dropout,ffn.inner_dropout   0.1
            attention_probs_dropout_prob    attention_dropout           0.0
            type_vocab_size                 embedding.type_vocab_size   1
            layer_norm_eps                  norm.eps                    1e-12
            hidden_act                      ffn.activation              gelu    GATED
            """,
            GATED=GATED,
        ),
        *PAD,
    )
    tasks = {
        "Model": HEADLESS,
        "ForMaskedLM": task(  # dense, exact GELU, norm, decoder (its bias the only one)
            "kind: mlm, activation: gelu",
            "lm_head.(dense,norm,decoder)  MLM_DENSE,MLM_NORM,MLM_DECODER\n"
            "lm_head.decoder.bias  MLM_BIAS  tensor",
            fields=(tie(True),),
        ),
        "ForSequenceClassification": task(  # BERT's: the pooler (dense + tanh), classifier
            "kind: classifier, pooling: cls, pooler: true",
            "classifier  CLASSIFIER",
            base="pooler.dense  HEAD_POOLER",
            labels=True,
        ),
        "ForTokenClassification": token_classifier(),
    }
    tensors = table(  # the checkpoints' own names ("new." in Alibaba's, "gte." as saved)
        """
        embeddings.word_embeddings              WORD
        embeddings.token_type_embeddings        TOKEN_TYPE
        embeddings.LayerNorm                    EMBED_NORM
        encoder.layer.{i}.attention.qkv_proj    QKV
        encoder.layer.{i}.attention.o_proj      ATTN_OUT
        encoder.layer.{i}.(attn_ln,mlp_ln)      ATTN_NORM,FFN_NORM
        encoder.layer.{i}.mlp.up_gate_proj      UP,GATE     split   # [up | gate]
        encoder.layer.{i}.mlp.down_proj         DOWN
        """,
        prefixes=("gte.", "new.", ""),
        stacks={"encoder": {}},
        ignore=(*POOLER, "rotary_emb.inv_freq", "rotary_emb.original_inv_freq"),
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Rotary settings (GTE's own default base where the config names none)."""
        config = {"rope_theta": THETA, **config}
        spec["position"] = {"kind": "rotary", **rope_parameters(config)}

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        config.update(rope_config(spec["position"]))
