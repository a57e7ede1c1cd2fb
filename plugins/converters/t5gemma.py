"""T5Gemma's balanced pairs (encoder and decoder of one width, e.g. 2B-2B): two Gemma 2
stacks (sandwich norms, soft-capped scores, sliding layers), the encoder's windows two-sided
(|q - k| <= sliding_window), the decoder cross-attending with its own attention settings;
each stack its own token table, the LM head tied to the decoder's and soft-capped."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from archzoo.parts.converter import ConversionError
from archzoo.specs.plan import stack_config

from .common import HEADLESS, table, task
from .gemma2 import Gemma2Converter, capped_lm_task

UNBALANCED = (
    "encoder and decoder stacks of different widths (T5Gemma's unbalanced pairs such as 9B-2B: "
    "cross-attention keys and values read the encoder's hidden_size; d_model is not a "
    "per-stack key)"
)
TENSORS = """
    {s}.embed_tokens                                        WORD
    {s}.layers.{i}.self_attn.(q_proj,k_proj,v_proj,o_proj)  Q,K,V,ATTN_OUT
    {s}.layers.{i}.cross_attn.(q_proj,k_proj,v_proj,o_proj) CROSS_Q,CROSS_K,CROSS_V,CROSS_OUT
    {s}.layers.{i}.(pre_self_attn_layernorm,post_self_attn_layernorm)   ATTN_NORM,ATTN_OUT_NORM
    {s}.layers.{i}.(pre_cross_attn_layernorm,post_cross_attn_layernorm) CROSS_NORM,CROSS_OUT_NORM
    {s}.layers.{i}.(pre_feedforward_layernorm,post_feedforward_layernorm) FFN_NORM,FFN_OUT_NORM
    {s}.layers.{i}.mlp.(gate_proj,up_proj,down_proj)        GATE,UP,DOWN
    {s}.norm                                                FINAL_NORM
"""
# the whole model's keys (transformers reads them from the top config, not the stacks')
TOP = ("model_type", "architectures", "tie_word_embeddings", "id2label", "label2id")
TOP += ("num_labels", "dropout_rate", "attention_dropout", "pad_token_id", "bos_token_id")
TOP += ("eos_token_id", "decoder_start_token_id")
STACK_KEYS = ("vocab_size", "n_layers", "n_heads", "head_dim", "d_ff", "attention", "position")
STACK_KEYS += ("layers",)
GEMMA2 = Gemma2Converter()


def widen(spec: dict[str, Any], by: int) -> None:
    """Every `local` window of a stack's spec `by` keys wider (two-sided: |q - k| < window)."""
    for part in (spec, *spec.get("layers", [])):
        att = part.get("attention") or {}
        if att.get("kind") == "local":
            part["attention"] = {**att, "window": att["window"] + by}


class T5GemmaConverter(Gemma2Converter, model_type="t5gemma", hf_prefix="T5Gemma"):
    family = "encoder-decoder"
    fixed = {**Gemma2Converter.fixed, "tie_embeddings": False}  # a token table per stack
    tasks = {
        "Model": HEADLESS,
        "ForConditionalGeneration": capped_lm_task(),
        "EncoderModel": task("kind: none", family="encoder"),
        # with is_encoder_decoder false (the encoder alone; see `to_spec`)
        "ForSequenceClassification": task(
            "kind: classifier, pooling: last, pooler: false",
            "score.out_proj  CLASSIFIER",
            family="encoder",
            labels=True,
        ),
        "ForTokenClassification": task(
            "kind: token_classifier", "score.out_proj  CLASSIFIER", family="encoder", labels=True
        ),
    }
    tensors = table(
        TENSORS,
        "lm_head.out_proj  LM_PROJ",
        prefixes=("model.", ""),
        stacks={"encoder": {"s": "encoder"}, "decoder": {"s": "decoder"}},
    )

    def to_spec(self, config: dict[str, Any], tensor_names: Sequence[str] = ()) -> dict[str, Any]:
        """The encoder's keys read as Gemma 2's, the decoder's as a second Gemma 2 stack."""
        enc, dec = (dict(config.get(k) or {}) for k in ("encoder", "decoder"))
        if enc.get("hidden_size") != dec.get("hidden_size"):
            raise ConversionError(
                f"config.json encoder.hidden_size={enc.get('hidden_size')} and "
                f"decoder.hidden_size={dec.get('hidden_size')}: not supported ({UNBALANCED})"
            )
        arch = str((config.get("architectures") or [""])[0])
        if arch.endswith("Classification") and config.get("is_encoder_decoder", True):
            raise ConversionError(
                f"config.json architectures=[{arch!r}] with is_encoder_decoder=true is not "
                "supported (the decoder's state after a right shift of input_ids); "
                "is_encoder_decoder=false (the encoder's states) is"
            )
        top = {k: v for k, v in config.items() if k not in ("encoder", "decoder")}
        soft = {"final_logit_softcapping": dec.get("final_logit_softcapping")}
        own = {k: v for k, v in enc.items() if k not in TOP}  # sizes: the stacks' own keys
        spec = super().to_spec({**top, **own, **soft}, tensor_names)
        widen(spec, 1)  # transformers: |q - k| <= sliding_window in the encoder
        if spec["family"] == "encoder-decoder":
            stack = GEMMA2.to_spec({**top, **dec, "architectures": ["Gemma2Model"]})
            spec["decoder"] = {k: stack[k] for k in STACK_KEYS if k in stack}
            spec["decoder"].setdefault("layers", [])  # not the encoder's sliding entries
        return spec

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """The two stacks' sub-configs, each written as Gemma 2's keys."""
        for which in ("encoder", "decoder") if spec["family"] != "encoder" else ("encoder",):
            stack = {**stack_config(copy.deepcopy(dict(spec)), which), "family": "decoder"}
            stack["head"] = {"kind": "none"}
            if which == "encoder":
                widen(stack, -1)
            sub = GEMMA2.hf_config(stack, "Model")
            config[which] = {k: v for k, v in sub.items() if k != "model_type"}
        config.setdefault("decoder", dict(config["encoder"]))
        config["is_encoder_decoder"] = spec["family"] == "encoder-decoder"
        for sub in (config["encoder"], config["decoder"]):  # the head's cap, read from decoder
            sub["final_logit_softcapping"] = config.get("final_logit_softcapping")
        for key in set(config["encoder"]) - {"vocab_size", *TOP}:  # the stacks' keys only
            config.pop(key, None)
