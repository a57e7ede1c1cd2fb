"""BERT and RoBERTa with a norm before each sublayer and one closing the encoder (pre-LN):
XLM-RoBERTa-XL (no embedding norm), RoBERTa-PreLayerNorm (an embedding norm too) and
Megatron-BERT (BERT's names and heads, no embedding norm)."""

from __future__ import annotations

from archzoo.parts.converter import spec_parts

from .bert import ABSOLUTE_ONLY, POOLER, BertConverter, RobertaConverter
from .common import AS_DECODER, BERT_BUFFERS, table

EMBEDDINGS = """
    embeddings.word_embeddings          WORD
    embeddings.position_embeddings      POSITION
    embeddings.token_type_embeddings    TOKEN_TYPE
"""
QKV = """
    encoder.layer.{i}.attention.self.(query,key,value)    QKV     fuse  # one GEMM, not three
    encoder.layer.{i}.attention.self.(query,key,value)    Q,K,V         # or separate ones
    encoder.layer.{i}.attention.output.dense              ATTN_OUT
    encoder.layer.{i}.(intermediate.dense,output.dense)   FC_IN,FC_OUT
"""
PRE_LN = spec_parts("block: pre_ln, embedding: {kind: token, norm: false}")


class XLMRobertaXLConverter(
    RobertaConverter, model_type="xlm-roberta-xl", hf_prefix="XLMRobertaXL"
):
    fixed = {**RobertaConverter.fixed, **PRE_LN}
    tensors = table(
        EMBEDDINGS
        + QKV
        + """
        encoder.layer.{i}.attention.self_attn_layer_norm    ATTN_NORM
        encoder.layer.{i}.LayerNorm                         FFN_NORM
        encoder.LayerNorm                                   FINAL_NORM
        """,
        prefixes=("roberta.", ""),
        stacks={"encoder": {}},
        ignore=(*BERT_BUFFERS, *POOLER),
    )


class RobertaPreLayerNormConverter(
    RobertaConverter, model_type="roberta-prelayernorm", hf_prefix="RobertaPreLayerNorm"
):
    fixed = {**RobertaConverter.fixed, **spec_parts("block: pre_ln")}
    tensors = table(
        EMBEDDINGS
        + QKV
        + """
        embeddings.LayerNorm                                EMBED_NORM
        encoder.layer.{i}.attention.LayerNorm               ATTN_NORM
        encoder.layer.{i}.intermediate.LayerNorm            FFN_NORM
        LayerNorm                                           FINAL_NORM
        """,
        prefixes=("roberta_prelayernorm.", ""),
        stacks={"encoder": {}},
        ignore=(*BERT_BUFFERS, *POOLER),
    )


class MegatronBertConverter(BertConverter, model_type="megatron-bert", hf_prefix="MegatronBert"):
    requires = ABSOLUTE_ONLY
    fixed = {**BertConverter.fixed, **PRE_LN}
    refused = {**BertConverter.refused, "ForCausalLM": AS_DECODER}
    tensors = table(
        EMBEDDINGS
        + QKV
        + """
        encoder.layer.{i}.attention.ln                      ATTN_NORM
        encoder.layer.{i}.ln                                FFN_NORM
        encoder.ln                                          FINAL_NORM
        """,
        prefixes=("bert.", ""),
        stacks={"encoder": {}},
        ignore=BertConverter.tensors.ignore,
    )
