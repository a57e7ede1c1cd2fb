"""DistilBERT: BERT's post-LN encoder at 6 layers, no token types, no pooler, renamed tensors."""

from __future__ import annotations

from archzoo.parts.converter import Converter, Field, parse_fields, spec_parts

from .common import (
    ACTIVATION,
    HEADLESS,
    PAD,
    QUESTION_ANSWERING,
    table,
    task,
    tie,
    token_classifier,
)

LAYER = "transformer.layer.{i}."
ACT = Field("activation", "head.activation", "gelu", ACTIVATION)  # the MLM transform's
# pre_classifier + ReLU on the first token, then the label (or choice) projection
POOLED = "pre_classifier  HEAD_POOLER\nclassifier  CLASSIFIER"
SEQ_DROPOUT = (Field("seq_classif_dropout", "head.dropout", 0.2),)


class DistilBertConverter(
    Converter, model_type="distilbert", hf_prefix="DistilBert", family="encoder"
):
    fixed = spec_parts(
        "block: post_ln, norm: {kind: layernorm, eps: 1.0e-12}, ffn: mlp",
        "embedding: {kind: token, norm: true}, position: {kind: learned, offset: 0}",
        "attention: {kind: mha, fused_qkv: true, bias: true}",
    )
    # sinusoidal_pos_embds: the checkpoint's position table holds the sinusoids; read as is
    fields = (
        *parse_fields(
            """
            vocab_size                  vocab_size
            dim                         d_model
            n_layers                    n_layers
            n_heads                     n_heads
            hidden_dim                  d_ff
            max_position_embeddings     max_len
            dropout                     dropout             0.1
            attention_dropout           attention_dropout   0.1
            activation                  ffn.activation      gelu    ACTIVATION
            """,
            ACTIVATION=ACTIVATION,
        ),
        *PAD,
    )
    tasks = {
        "Model": HEADLESS,
        "ForMaskedLM": task(
            "kind: mlm",
            """
            vocab_transform     MLM_DENSE
            vocab_layer_norm    MLM_NORM
            vocab_projector     MLM_DECODER
            vocab_projector.bias    MLM_BIAS    tensor  # the decoder bias, its name in archzoo
            """,
            fields=(ACT, tie(True)),
        ),
        "ForSequenceClassification": task(
            "kind: classifier, pooling: cls, pooler: true, pooler_activation: relu",
            POOLED,
            labels=True,
            fields=SEQ_DROPOUT,
        ),
        "ForTokenClassification": token_classifier(),
        "ForQuestionAnswering": QUESTION_ANSWERING,
        "ForMultipleChoice": task(
            "kind: multiple_choice, pooling: cls, pooler: true, pooler_activation: relu",
            POOLED,
            fields=SEQ_DROPOUT,
        ),
    }
    tensors = table(
        f"""
        embeddings.word_embeddings          WORD
        embeddings.position_embeddings      POSITION
        embeddings.LayerNorm                EMBED_NORM
        {LAYER}attention.(q_lin,k_lin,v_lin)    QKV     fuse
        {LAYER}attention.(q_lin,k_lin,v_lin)    Q,K,V
        {LAYER}attention.out_lin                ATTN_OUT
        {LAYER}sa_layer_norm                    ATTN_NORM
        {LAYER}ffn.(lin1,lin2)                  FC_IN,FC_OUT
        {LAYER}output_layer_norm                FFN_NORM
        """,
        prefixes=("distilbert.", ""),
        stacks={"encoder": {}},
        ignore=("embeddings.position_ids",),
    )
