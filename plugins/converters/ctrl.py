"""CTRL: a pre-LN decoder with sqrt(d)-scaled token embeddings, fixed sinusoidal positions
(every sine, then every cosine), ReLU MLP, and an LM head tied to the token table with a bias."""

from __future__ import annotations

from archzoo.parts.converter import Converter, parse_fields, spec_parts

from .common import PAD, decoder_tasks, table, task, tie

LM = task("kind: lm, bias: true", "lm_head  LM_PROJ", fields=(tie(True),))


class CTRLConverter(Converter, model_type="ctrl", hf_prefix="CTRL", family="decoder"):
    # the blocks' LayerNorms are fixed at 1e-6 in transformers; the final one reads the config
    requires = {"layer_norm_epsilon": 1e-6}
    fixed = spec_parts(
        "embedding: {kind: token, scale: true}, position: {kind: sinusoidal, layout: halves}",
        "attention: {kind: mha, fused_qkv: false, bias: true}, block: pre_ln",
        "norm: {kind: layernorm, eps: 1.0e-6}, ffn: {kind: mlp, activation: relu}",
        "attention_dropout: 0.0",  # CTRL has no dropout on attention probabilities
    )
    fields = (
        *parse_fields(
            """
            vocab_size              vocab_size
            n_embd                  d_model
            n_layer                 n_layers
            n_head                  n_heads
            dff                     d_ff
            n_positions             max_len             256
            resid_pdrop             dropout             0.1
            embd_pdrop              embedding.dropout   0.1
            """
        ),
        *PAD,
    )
    tasks = {
        key: value
        for key, value in decoder_tasks("LMHeadModel", LM).items()
        if key in ("Model", "LMHeadModel")
    }
    tasks["ForSequenceClassification"] = task(
        "kind: classifier, pooling: last, pooler: false, bias: false",
        "classifier  CLASSIFIER",
        labels=True,
    )
    tensors = table(
        """
        w                                   WORD
        h.{i}.multi_head_attention.(Wq,Wk,Wv,dense)     Q,K,V,ATTN_OUT
        h.{i}.(layernorm1,layernorm2)       ATTN_NORM,FFN_NORM
        h.{i}.ffn.(0,2)                     FC_IN,FC_OUT
        layernorm                           FINAL_NORM
        """,
        prefixes=("transformer.", ""),
        ignore=("pos_encoding",),  # a buffer of the fixed table (old versions saved it)
    )
