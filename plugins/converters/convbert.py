"""ConvBERT (Jiang et al., 2020): ELECTRA's post-LN encoder (an E-wide embedding projected to
d_model when E != d, the generator's MLM head) whose attention is `span_conv` (self-attention
heads beside span-based dynamic convolution heads, head_ratio and conv_kernel_size) and whose
FFN is block-diagonal in num_groups groups (saved as (G, in / G, out / G) blocks); a
classifier whose dense layer applies the model's activation and RoFormer's multiple-choice
summary (the row's last place)."""

from __future__ import annotations

from typing import Any

from archzoo.parts.converter import ConversionError, Field, parse_fields, spec_parts

from .bert import BertConverter, bert_fields
from .common import (
    BERT_BUFFERS,
    BERT_EMBEDDINGS,
    HEADLESS,
    QUESTION_ANSWERING,
    table,
    token_classifier,
)
from .electra import ElectraConverter
from .roformer import SUMMARY, RoFormerConverter

SELF = "encoder.layer.{i}.attention.self."
MIXED = parse_fields(
    """
    head_ratio          attention.head_ratio                    2
    conv_kernel_size    attention.conv_kernel_size              9
    num_groups          ffn.in_groups,ffn.out_groups            1
    """
)


class ConvBertConverter(ElectraConverter, model_type="convbert", hf_prefix="ConvBert"):
    requires = {"is_decoder": False, "add_cross_attention": False}
    fixed = {**BertConverter.fixed, **spec_parts("attention: {kind: span_conv}")}
    fields = (
        *bert_fields(dropout=0.1, activation="gelu"),
        Field("embedding_size", "embedding.embedding_size", 768),
        *MIXED,
    )
    tasks = {
        "Model": HEADLESS,
        "ForMaskedLM": ElectraConverter.tasks["ForMaskedLM"],  # the generator's head
        "ForSequenceClassification": RoFormerConverter.tasks["ForSequenceClassification"],
        "ForTokenClassification": token_classifier(),
        "ForQuestionAnswering": QUESTION_ANSWERING,
        "ForMultipleChoice": RoFormerConverter.tasks["ForMultipleChoice"],
    }
    refused: dict[str, str] = {}
    tensors = table(
        BERT_EMBEDDINGS
        + "embeddings_project  EMBED_PROJECT\n"
        + f"""
        {SELF}(query,key,value)                       Q,K,V
        {SELF}key_conv_attn_layer.depthwise           SPAN_KEY_DEPTHWISE
        {SELF}key_conv_attn_layer.pointwise.weight    SPAN_KEY_POINTWISE_WEIGHT  kernel1 tensor
        {SELF}key_conv_attn_layer.bias                SPAN_KEY_POINTWISE_BIAS    column tensor
        {SELF}(conv_kernel_layer,conv_out_layer)      SPAN_KERNEL,SPAN_VALUE
        encoder.layer.{{i}}.attention.output.(dense,LayerNorm)  ATTN_OUT,ATTN_NORM
        encoder.layer.{{i}}.intermediate.dense        FC_IN       group_blocks_in
        encoder.layer.{{i}}.output.dense              FC_OUT      group_blocks_out
        encoder.layer.{{i}}.output.LayerNorm          FFN_NORM
        """,
        prefixes=("convbert.", ""),
        stacks={"encoder": {}},
        ignore=BERT_BUFFERS,
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """E != d_model: the factorized embedding (ELECTRA's); the plain summary only."""
        super().adjust(spec, config)
        if spec["head"]["kind"] == "multiple_choice" and any(
            config.get(k) not in (None, v) for k, v in SUMMARY.items()
        ):
            raise ConversionError(f"config.json summary_*: ConvBERT's summary is {SUMMARY} only")
