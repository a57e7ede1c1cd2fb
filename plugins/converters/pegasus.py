"""Pegasus: Marian's layout with pre-LN blocks and a final norm per stack."""

from __future__ import annotations

from archzoo.converter import spec_parts

from .bart import LM_FIXED_BIAS
from .common import DECODER_LM, HEADLESS
from .marian import MarianConverter


class PegasusConverter(MarianConverter, model_type="pegasus", hf_prefix="Pegasus"):
    requires = {}
    fixed = spec_parts(
        "tie_embeddings: true, block: pre_ln, ffn: mlp",
        "embedding: token, norm: {kind: layernorm, eps: 1.0e-5}",
        "position: {kind: sinusoidal, layout: halves}",
        "attention: {kind: mha, fused_qkv: false, bias: true}",
    )
    tasks = {
        "Model": HEADLESS,
        "ForConditionalGeneration": LM_FIXED_BIAS,
        "ForCausalLM": DECODER_LM,
    }
