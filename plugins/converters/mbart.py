"""mBART: BART with pre-LN blocks and a final norm per stack (learned positions offset by
2, embedding norm, scaled embeddings in the released checkpoints)."""

from __future__ import annotations

from archzoo.parts.converter import Converter

from .bart import BART_FIELDS, BART_STACKS, BART_TENSORS, LM_FIXED_BIAS, bart_parts
from .common import DECODER_LM, HEADLESS, QUESTION_ANSWERING, eos_classifier, table


class MBartConverter(Converter, model_type="mbart", hf_prefix="MBart", family="encoder-decoder"):
    fixed = bart_parts("pre_ln", "{kind: token, norm: true}", "{kind: learned, offset: 2}")
    fields = BART_FIELDS
    tasks = {
        "Model": HEADLESS,
        "ForConditionalGeneration": LM_FIXED_BIAS,
        "ForQuestionAnswering": QUESTION_ANSWERING,
        "ForSequenceClassification": eos_classifier(2),
        "ForCausalLM": DECODER_LM,
    }
    tensors = table(BART_TENSORS, prefixes=("model.", ""), stacks=BART_STACKS)
