"""BART: post-LN encoder-decoder, learned positions offset by 2, embedding LayerNorm."""

from __future__ import annotations

from typing import Any

from archzoo.parts.converter import Converter, parse_fields, spec_parts

from .common import (
    ACTIVATION,
    DECODER_LM,
    HEADLESS,
    QUESTION_ANSWERING,
    TASK_LM,
    eos_classifier,
    table,
    task,
    tie,
)

# The size and dropout keys of the BART family (BART, mBART, Marian, Pegasus, M2M-100).
BART_FIELDS = parse_fields(
    """
    pad_token_id                pad_token_id        1
    vocab_size                  vocab_size
    d_model                     d_model
    encoder_layers              n_layers
    encoder_attention_heads     n_heads
    encoder_ffn_dim             d_ff
    decoder_layers              decoder.n_layers
    decoder_attention_heads     decoder.n_heads
    decoder_ffn_dim             decoder.d_ff
    max_position_embeddings     max_len
    dropout                     dropout             0.1
    attention_dropout           attention_dropout   0.0
    activation_dropout          ffn.inner_dropout   0.0
    scale_embedding             embedding.scale     False
    activation_function         ffn.activation      gelu    ACTIVATION
    """,
    ACTIVATION=ACTIVATION,
)
# Every tensor a BART-family model may have; a rule whose archzoo side the spec lacks (no
# embedding norm in Marian, no final norm in BART) matches nothing.
BART_TENSORS = """
    shared|{s}.embed_tokens                 WORD        # one table for both stacks
    {s}.embed_positions                     POSITION
    {s}.layernorm_embedding                 EMBED_NORM
    {s}.layers.{i}.self_attn.(q_proj,k_proj,v_proj,out_proj)     Q,K,V,ATTN_OUT
    {s}.layers.{i}.encoder_attn.(q_proj,k_proj,v_proj,out_proj)  CROSS_Q,CROSS_K,CROSS_V,CROSS_OUT
    {s}.layers.{i}.(self_attn_layer_norm,encoder_attn_layer_norm) ATTN_NORM,CROSS_NORM
    {s}.layers.{i}.(fc1,fc2,final_layer_norm)                   FC_IN,FC_OUT,FFN_NORM
    {s}.layer_norm                          FINAL_NORM
"""
BART_STACKS = {"encoder": {"s": "encoder"}, "decoder": {"s": "decoder"}}


def bart_parts(block: str, embedding: str, position: str) -> dict[str, Any]:
    """The fixed spec parts of a BART-family type: tied embeddings, LayerNorm (eps 1e-5),
    biased separate q/k/v and an MLP, with its own `block`, `embedding` and `position`."""
    return spec_parts(
        f"tie_embeddings: true, block: {block}, ffn: mlp",
        f"embedding: {embedding}, norm: {{kind: layernorm, eps: 1.0e-5}}",
        f"position: {position}",
        "attention: {kind: mha, fused_qkv: false, bias: true}",
    )


# The LM head with fairseq's final_logits_bias (a fixed, untrained bias).
LM_FIXED_BIAS = task(
    "kind: lm, fixed_bias: true",
    TASK_LM + "final_logits_bias  LM_FIXED_BIAS  flatten tensor  # (1, V)",
    fields=(tie(True),),
)


class BartConverter(Converter, model_type="bart", hf_prefix="Bart", family="encoder-decoder"):
    requires = {"normalize_before": False, "add_final_layer_norm": False}
    # BART's learned positions start at index 2
    fixed = bart_parts("post_ln", "{kind: token, norm: true}", "{kind: learned, offset: 2}")
    fields = BART_FIELDS
    tasks = {
        "Model": HEADLESS,
        "ForConditionalGeneration": LM_FIXED_BIAS,
        "ForQuestionAnswering": QUESTION_ANSWERING,  # on the decoder's states
        "ForSequenceClassification": eos_classifier(2),
        "ForCausalLM": DECODER_LM,
    }
    tensors = table(BART_TENSORS, prefixes=("model.", ""), stacks=BART_STACKS)
