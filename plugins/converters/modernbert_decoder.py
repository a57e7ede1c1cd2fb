"""ModernBERT decoder (`modernbert-decoder`, Ettin): ModernBERT's blocks run causally, with
q/k/v apart, sliding layers seeing `local_attention // 2` keys (itself included), and an LM
head that reads through dense + activation + norm (`transform`) into a tied decoder with a
bias; the sequence classifier reads the last real token through the same transform."""

from __future__ import annotations

from archzoo.parts.converter import parse_fields, spec_parts

from .common import ACTIVATION, HEADLESS, table, task, tie
from .modernbert import DROPOUT, ModernBertConverter

TRANSFORM = parse_fields(
    """
    classifier_activation   head.transform_activation   gelu    ACTIVATION
    classifier_bias         head.transform_bias         False
    decoder_bias            head.bias                   True
    """,
    ACTIVATION=ACTIVATION,
)
POOLER = parse_fields(
    """
    classifier_activation   head.pooler_activation      gelu    ACTIVATION
    classifier_bias         head.pooler_bias,head.bias  False
    """,
    ACTIVATION=ACTIVATION,
)


class ModernBertDecoderConverter(
    ModernBertConverter,
    model_type="modernbert-decoder",
    hf_prefix="ModernBertDecoder",
    family="decoder",
    default_task="ForCausalLM",
):
    fixed = {
        **ModernBertConverter.fixed,
        **spec_parts("attention: {kind: mha, fused_qkv: false}"),
    }
    tasks = {
        "Model": HEADLESS,
        "ForCausalLM": task(
            "kind: lm, transform: true",
            "lm_head.(dense,norm)  MLM_DENSE,MLM_NORM\ndecoder  LM_PROJ",
            fields=(*TRANSFORM, tie(True)),
        ),
        "ForSequenceClassification": task(
            "kind: classifier, pooling: last, pooler: true, pooler_norm: true",
            "head.(dense,norm)  HEAD_POOLER,HEAD_POOLER_NORM\nclassifier  CLASSIFIER",
            labels=True,
            fields=(*POOLER, DROPOUT),
        ),
    }
    window_beyond_half = 0  # a causal window: q - k < local_attention // 2
    tensors = table(
        """
        embeddings.tok_embeddings           WORD
        embeddings.norm                     EMBED_NORM
        layers.{i}.attn_norm                ATTN_NORM
        layers.{i}.attn.(q_proj,k_proj,v_proj,Wo)   Q,K,V,ATTN_OUT
        layers.{i}.mlp_norm                 FFN_NORM
        layers.{i}.mlp.Wi                   GATE,UP     split   # [input | gate]
        layers.{i}.mlp.Wo                   DOWN
        final_norm                          FINAL_NORM
        """,
        prefixes=("model.", ""),
    )
