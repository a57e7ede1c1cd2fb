"""Pegasus: Marian's layout with pre-LN blocks and a final norm per stack."""

from __future__ import annotations

from .bart import LM_FIXED_BIAS, bart_parts
from .common import DECODER_LM, HEADLESS
from .marian import MarianConverter


class PegasusConverter(MarianConverter, model_type="pegasus", hf_prefix="Pegasus"):
    requires = {}
    fixed = bart_parts("pre_ln", "token", "{kind: sinusoidal, layout: halves}")
    tasks = {
        "Model": HEADLESS,
        "ForConditionalGeneration": LM_FIXED_BIAS,
        "ForCausalLM": DECODER_LM,
    }
