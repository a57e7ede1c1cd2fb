"""mBART: BART with pre-LN blocks and a final norm per stack (learned positions offset by
2, embedding norm, scaled embeddings in the released checkpoints)."""

from __future__ import annotations

from archzoo.converter import Converter, spec_parts

from .bart import BART_FIELDS, BART_STACKS, BART_TENSORS, LM_FIXED_BIAS
from .common import DECODER_LM, HEADLESS, QUESTION_ANSWERING, eos_classifier, table


class MBartConverter(Converter, model_type="mbart", hf_prefix="MBart", family="encoder-decoder"):
    fixed = spec_parts(
        "tie_embeddings: true, block: pre_ln, ffn: mlp",
        "embedding: {kind: token, norm: true}, norm: {kind: layernorm, eps: 1.0e-5}",
        "position: {kind: learned, offset: 2}",
        "attention: {kind: mha, fused_qkv: false, bias: true}",
    )
    fields = BART_FIELDS
    tasks = {
        "Model": HEADLESS,
        "ForConditionalGeneration": LM_FIXED_BIAS,
        "ForQuestionAnswering": QUESTION_ANSWERING,
        "ForSequenceClassification": eos_classifier(2),
        "ForCausalLM": DECODER_LM,
    }
    tensors = table(BART_TENSORS, prefixes=("model.", ""), stacks=BART_STACKS)
