"""RemBERT (Chung et al., 2021): BERT's post-LN encoder whose narrow input embedding
(input_embedding_size, with its positions and types) is projected up to d_model, and whose
masked-LM transform widens to output_embedding_size before an untied decoder."""

from __future__ import annotations

from archzoo.parts.converter import Field, spec_parts

from .bert import LAYERS, POOLER, BertConverter, bert_fields, mlm_activation
from .common import AS_DECODER, BERT_BUFFERS, BERT_EMBEDDINGS, encoder_tasks, table, task, tie

MLM = task(  # dense d -> output_embedding_size, activation, norm, decoder (its own bias)
    "kind: mlm",
    """
    cls.predictions.(dense,LayerNorm,decoder)   MLM_DENSE,MLM_NORM,MLM_DECODER
    cls.predictions.decoder.bias                MLM_BIAS    tensor
    """,
    fields=(
        mlm_activation("gelu"),
        Field("output_embedding_size", "head.width", 1664),
        tie(False),
    ),
)


class RemBertConverter(BertConverter, model_type="rembert", hf_prefix="RemBert"):
    requires = {"is_decoder": False}
    fixed = {**BertConverter.fixed, **spec_parts("embedding: {kind: factorized, norm: true}")}
    fields = (
        *bert_fields(dropout=0.0, activation="gelu"),
        Field("input_embedding_size", "embedding.embedding_size", 256),
    )
    tasks = {k: t for k, t in encoder_tasks("pooler.dense", MLM).items() if k != "ForPreTraining"}
    refused = {"ForCausalLM": AS_DECODER}
    tensors = table(
        BERT_EMBEDDINGS + "encoder.embedding_hidden_mapping_in  EMBED_PROJECT\n" + LAYERS,
        prefixes=("rembert.", ""),
        stacks={"encoder": {}},
        ignore=(*BERT_BUFFERS, *POOLER),
    )
