"""Pegasus: pre-LN encoder-decoder with a final norm per stack, Marian's sinusoidal
positions, scaled embeddings, no embedding norm."""

from __future__ import annotations

from archzoo.converter import spec_parts

from .bart import BART_FIELDS, BART_STACKS, BART_TENSORS, LM_FIXED_BIAS
from .common import HEADLESS, table
from .marian import SavedSinusoidsConverter


class PegasusConverter(SavedSinusoidsConverter):
    model_type = "pegasus"
    hf_prefix = "Pegasus"
    family = "encoder-decoder"
    fixed = spec_parts(
        "tie_embeddings: true, block: pre_ln, ffn: mlp",
        "embedding: token, norm: {kind: layernorm, eps: 1.0e-5}",
        "position: {kind: sinusoidal, layout: halves}",
        "attention: {kind: mha, fused_qkv: false, bias: true}",
    )
    fields = BART_FIELDS
    tasks = {"Model": HEADLESS, "ForConditionalGeneration": LM_FIXED_BIAS}
    default_task = "ForConditionalGeneration"
    tensors = table(
        BART_TENSORS,
        prefixes=("model.", ""),
        stacks=BART_STACKS,
        ignore=("{s}.embed_positions.weight",),
    )
