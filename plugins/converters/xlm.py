"""XLM (Lample & Conneau, 2019): a post-LN encoder (or, with `causal`, a CLM decoder) whose
embedding adds learned (or sinusoid-filled) positions, language vectors for the `langs`
input (`n_langs` > 1 with `use_lang_emb`) and token types read from the token table; a
4 x emb_dim GELU (or ReLU) FFN; a tied output projection with a bias."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import (
    ConversionError,
    Converter,
    Field,
    Values,
    parse_fields,
    spec_parts,
)

from .common import HEADLESS, PAD, QUESTION_ANSWERING, table, task, tie, token_classifier

LAYER_FIELDS = parse_fields(
    """
    vocab_size|n_words          vocab_size
    emb_dim                     d_model
    n_layers                    n_layers
    n_heads                     n_heads
    max_position_embeddings     max_len             512
    dropout                     dropout             0.1
    attention_dropout           attention_dropout   0.1
    layer_norm_eps              norm.eps            1e-12
    gelu_activation             ffn.activation      True    GELU
    """,
    GELU=Values({True: "gelu", False: "relu"}),
)
SUMMARY_DROPOUT = Field("summary_first_dropout", "head.dropout", 0.1)
SUMMARY = {  # XLMSequenceSummary as a plain linear on the first token
    "summary_type": "first",
    "summary_use_proj": True,
    "summary_proj_to_labels": True,
    "summary_activation": None,
}


class XLMConverter(
    Converter, model_type="xlm", hf_prefix="XLM", family="encoder", default_task="WithLMHeadModel"
):
    attention_impl = "eager"  # transformers attends op by op here: its bits in 16-bit floats
    requires = {"asm": False, "is_encoder": True}  # adaptive softmax: not a tied projection
    fixed = spec_parts(
        "block: {kind: post_ln, zero_padded: true}, norm: layernorm, ffn: mlp",
        "position: {kind: learned, offset: 0}",
        "embedding: {kind: token, norm: true, word_types: true, positions_first: true}",
        "attention: {kind: mha, fused_qkv: true, bias: true, scale_at: query}",
    )
    fields = (*LAYER_FIELDS, *PAD)
    refused = {
        "ForQuestionAnswering": "XLM's SQuAD 2.0 head (start top-k, end logits conditioned on "
        "each start, an answerability classifier): archzoo's question_answering head is "
        "XLMForQuestionAnsweringSimple's start/end logits",
    }
    tasks = {
        "Model": HEADLESS,
        "WithLMHeadModel": task(  # an encoder's MLM head, or a causal model's LM head
            "kind: mlm, transform: false",
            """
            pred_layer.proj             MLM_DECODER
            pred_layer.proj.bias        MLM_BIAS    tensor
            pred_layer.proj             LM_PROJ
            """,
            fields=(tie(True),),
        ),
        "ForSequenceClassification": task(
            "kind: classifier, pooling: cls, pooler: false",
            "sequence_summary.summary  CLASSIFIER",
            labels=True,
            fields=(SUMMARY_DROPOUT,),
        ),
        "ForTokenClassification": token_classifier(),
        "ForQuestionAnsweringSimple": QUESTION_ANSWERING,
        "ForMultipleChoice": task(  # summary (D -> num_labels) then logits_proj (-> 1): one linear
            "kind: multiple_choice, pooling: cls, pooler: false",
            "(sequence_summary.summary.weight,sequence_summary.summary.bias,logits_proj.weight,"
            "logits_proj.bias)  CLASSIFIER_WEIGHT,CLASSIFIER_BIAS  compose  tensor",
            fields=(SUMMARY_DROPOUT,),
        ),
    }
    tensors = table(
        """
        embeddings                              WORD
        position_embeddings                     POSITION
        lang_embeddings                         LANG
        layer_norm_emb                          EMBED_NORM
        attentions.{i}.(q_lin,k_lin,v_lin)      QKV     fuse
        attentions.{i}.(q_lin,k_lin,v_lin)      Q,K,V
        attentions.{i}.out_lin                  ATTN_OUT
        layer_norm1.{i}                         ATTN_NORM
        ffns.{i}.(lin1,lin2)                    FC_IN,FC_OUT
        layer_norm2.{i}                         FFN_NORM
        """,
        prefixes=("transformer.", ""),
        stacks={"encoder": {}, "decoder": {}},
        ignore=("position_ids",),
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """The 4x FFN, the language table, the sequence summary, and `causal` as a decoder."""
        spec["d_ff"] = 4 * spec["d_model"]
        n_langs = int(config.get("n_langs", 1))
        spec["embedding"]["n_langs"] = n_langs if config.get("use_lang_emb", True) else 0
        if spec["embedding"]["n_langs"] == 1:
            spec["embedding"]["n_langs"] = 0  # HF has no table for one language
        if spec["head"]["kind"] in ("classifier", "multiple_choice"):
            for key, value in SUMMARY.items():
                if config.get(key, value) != value:
                    raise ConversionError(
                        f"config.json {key}={config[key]!r} is not supported for "
                        f"XLM's sequence summary (only {value!r}: a linear on the first token)"
                    )
        if config.get("causal"):
            spec["family"] = "decoder"
            if spec["head"]["kind"] == "mlm":  # XLM's CLM loss scores labels unshifted
                spec["head"] = {
                    "kind": "lm",
                    "tie": spec["head"]["tie"],
                    "bias": True,
                    "shift": False,
                }

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """`causal` from the family, `n_langs` (at least 1) from the language table."""
        config["causal"] = spec["family"] == "decoder"
        config["n_langs"] = max(1, spec["embedding"].get("n_langs", 0))
        config["use_lang_emb"] = True
