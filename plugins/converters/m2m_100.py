"""M2M-100: pre-LN encoder-decoder with a final norm per stack, scaled embeddings, and
fairseq's sinusoidal positions (tensor2tensor frequencies, sines then cosines) counted from
padding_idx + 1."""

from __future__ import annotations

from typing import Any

from archzoo.parts.converter import Converter, get

from .bart import BART_FIELDS, BART_STACKS, BART_TENSORS, bart_parts
from .common import HEADLESS, lm_task, table


class M2M100Converter(
    Converter, model_type="m2m_100", hf_prefix="M2M100", family="encoder-decoder"
):
    fixed = bart_parts(
        "pre_ln",
        "token",
        "{kind: sinusoidal, layout: halves, frequencies: tensor2tensor, count: tokens}",
    )
    fields = BART_FIELDS
    tasks = {"Model": HEADLESS, "ForConditionalGeneration": lm_task(True)}
    tensors = table(BART_TENSORS, prefixes=("model.", ""), stacks=BART_STACKS)

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Real tokens sit at positions padding_idx + 1, + 2, ... (fairseq's make_positions)."""
        spec["position"]["offset"] = get(config, "pad_token_id", 1) + 1
