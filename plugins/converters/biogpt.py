"""BioGPT (Luo et al., 2022): a pre-LN decoder with a final norm (LayerNorm eps 1e-5 whatever
layer_norm_eps says), sqrt(d)-scaled tied token vectors, learned positions by index from
row 2, biased q/k/v, a GELU MLP; the decoder task heads on the last token or every token."""

from __future__ import annotations

from archzoo.parts.converter import Converter, parse_fields, spec_parts

from .common import ACTIVATION, HEADLESS, lm_task, table, task, token_classifier

SIZES = """
    vocab_size                      vocab_size
    hidden_size                     d_model
    num_hidden_layers               n_layers
    num_attention_heads             n_heads
    intermediate_size               d_ff
    max_position_embeddings         max_len             1024
    hidden_dropout_prob             dropout             0.1
    attention_probs_dropout_prob    attention_dropout   0.1
    activation_dropout              ffn.inner_dropout   0.0
    scale_embedding                 embedding.scale     True
    hidden_act                      ffn.activation      gelu    ACTIVATION
    pad_token_id                    pad_token_id        1
"""


class BioGptConverter(Converter, model_type="biogpt", hf_prefix="BioGpt", family="decoder"):
    fixed = spec_parts(
        "block: pre_ln, ffn: mlp, norm: {kind: layernorm, eps: 1.0e-5}",
        "position: {kind: learned, offset: 2}",
        "attention: {kind: mha, fused_qkv: false, bias: true}",
    )
    fields = parse_fields(SIZES, ACTIVATION=ACTIVATION)
    tasks = {
        "Model": HEADLESS,
        "ForCausalLM": lm_task(True, "output_projection  LM_PROJ"),
        "ForSequenceClassification": task(  # `score` on the last token that is not a pad
            "kind: classifier, pooling: last, pooler: false, bias: false",
            "score  CLASSIFIER",
            labels=True,
        ),
        "ForTokenClassification": token_classifier(),
    }
    tensors = table(
        """
        embed_tokens                                            WORD
        embed_positions                                         POSITION
        layers.{i}.self_attn.(q_proj,k_proj,v_proj,out_proj)    Q,K,V,ATTN_OUT
        layers.{i}.(self_attn_layer_norm,final_layer_norm)      ATTN_NORM,FFN_NORM
        layers.{i}.(fc1,fc2)                                    FC_IN,FC_OUT
        layer_norm                                              FINAL_NORM
        """,
        prefixes=("biogpt.", ""),
    )
