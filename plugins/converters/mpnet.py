"""MPNet (Song et al., 2020): RoBERTa's post-LN encoder without token types whose attention
adds T5's bucketed relative bias (32 buckets up to distance 128, one table for the stack) to
learned absolute positions counted over real tokens from row 2 (padding_idx 1)."""

from __future__ import annotations

from archzoo.parts.converter import spec_parts

from .bert import POOLER, RobertaConverter, bert_fields
from .common import BERT_BUFFERS, encoder_tasks, table, task, tie

MLM = task(  # dense, exact GELU (whatever hidden_act says), norm, decoder + bias
    "kind: mlm, activation: gelu",
    """
    lm_head.(dense,layer_norm,decoder)      MLM_DENSE,MLM_NORM,MLM_DECODER
    lm_head.decoder.bias|lm_head.bias       MLM_BIAS    tensor
    """,
    fields=(tie(True),),
)


class MPNetConverter(RobertaConverter, model_type="mpnet", hf_prefix="MPNet"):
    # transformers buckets with 32 whatever the table's size; padding_idx is always 1
    requires = {"relative_attention_num_buckets": 32, "pad_token_id": 1}
    fixed = {
        **RobertaConverter.fixed,
        **spec_parts(
            "embedding: {kind: token, norm: true, type_vocab_size: 0}",
            "position: {kind: t5_relative, absolute: true, offset: 2, count: tokens}",
        ),
    }
    fields = tuple(
        f for f in bert_fields(dropout=0.1, activation="gelu") if f.hf != "type_vocab_size"
    )
    tasks = encoder_tasks("pooler.dense", MLM, RobertaConverter.tasks["ForSequenceClassification"])
    tensors = table(
        """
        embeddings.word_embeddings                          WORD
        embeddings.position_embeddings                      ABSOLUTE
        embeddings.LayerNorm                                EMBED_NORM
        encoder.relative_attention_bias                     POSITION
        encoder.layer.{i}.attention.attn.(q,k,v)            QKV     fuse  # one GEMM
        encoder.layer.{i}.attention.attn.(q,k,v,o)          Q,K,V,ATTN_OUT
        encoder.layer.{i}.attention.LayerNorm               ATTN_NORM
        encoder.layer.{i}.(intermediate.dense,output.dense) FC_IN,FC_OUT
        encoder.layer.{i}.output.LayerNorm                  FFN_NORM
        """,
        prefixes=("mpnet.", ""),
        stacks={"encoder": {}},
        ignore=(*BERT_BUFFERS, *POOLER),
    )
