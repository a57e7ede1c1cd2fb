"""DeBERTa (v1: `deberta`) and DeBERTa v2/v3 (`deberta-v2`): BERT's post-LN encoder with
disentangled attention over a relative table shared by the layers (`deberta_relative`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import ConversionError, Converter, Field, TensorSource, get, spec_parts
from archzoo.parts.hf_tensors import ZooNames

from .bert import LAYER_OUTPUTS, bert_fields, mlm_activation
from .common import ACTIVATION, HEADLESS, QUESTION_ANSWERING, table, task, tie

SELF = "encoder.layer.{i}.attention.self."
EMBEDDINGS = """
    embeddings.word_embeddings          WORD
    embeddings.position_embeddings      POSITION    # without relative attention: learned
    embeddings.position_embeddings      ABSOLUTE    # with it: deberta_relative's own table
    embeddings.token_type_embeddings    TOKEN_TYPE
    embeddings.LayerNorm                EMBED_NORM
    encoder.rel_embeddings              RELATIVE
"""
# the legacy MLM head's names; the newer head (lm_predictions.lm_head) is read as these
MLM = task(
    "kind: mlm",
    """
    cls.predictions.transform.dense             MLM_DENSE
    cls.predictions.transform.LayerNorm         MLM_NORM
    cls.predictions.decoder                     MLM_DECODER
    cls.predictions.decoder.bias|cls.predictions.bias   MLM_BIAS    tensor
    """,
    fields=(mlm_activation("gelu"), tie(True)),
)
# ContextPooler: dense + activation on the first token, then the label / choice projection
POOLED = "pooler.dense  HEAD_POOLER\nclassifier  CLASSIFIER"
POOLER = (
    Field("pooler_hidden_act", "head.pooler_activation", "gelu", ACTIVATION),
    Field("cls_dropout", "head.dropout", None),
)
TASKS = {
    "Model": HEADLESS,
    "ForMaskedLM": MLM,
    "ForSequenceClassification": task(
        "kind: classifier, pooling: cls, pooler: true", POOLED, labels=True, fields=POOLER
    ),
    "ForTokenClassification": task("kind: token_classifier", "classifier  CLASSIFIER", labels=True),
    "ForQuestionAnswering": QUESTION_ANSWERING,
}
IGNORE = ("embeddings.position_ids",)


def attention_terms(config: dict[str, Any]) -> list[str]:
    """pos_att_type as a list: HF's list or the older 'p2c|c2p' string; only c2p and p2c."""
    value = get(config, "pos_att_type", None) or []
    terms = [t.strip().lower() for t in value.split("|")] if isinstance(value, str) else value
    if any(t not in ("c2p", "p2c") for t in terms) or len(set(terms)) != len(terms):
        raise ConversionError(
            f"config.json pos_att_type={value!r} is not supported: each of c2p, p2c at most once"
        )
    return sorted(terms)  # c2p before p2c: the order does not change the scores


class DebertaConverter(Converter, model_type="deberta", hf_prefix="Deberta", family="encoder"):
    fixed = spec_parts(
        "block: post_ln, norm: layernorm, ffn: mlp",
        "embedding: {kind: token, norm: true, zero_padded: true, positions_first: true}",
        "attention: {kind: disentangled, share_key: false, bias: qv, position_key_bias: false,"
        " uniform_padded: true}",
    )
    fields = bert_fields(dropout=0.1, activation="gelu", types=0, eps=1e-7)
    tasks = TASKS
    default_task = "ForMaskedLM"
    tensors = table(
        EMBEDDINGS
        + f"""
        {SELF}in_proj                       QKV     heads_interleaved  # per head [q|k|v]
        {SELF}(q_bias,v_bias)               Q_BIAS,V_BIAS   tensor
        {SELF}(pos_proj,pos_q_proj)         POSITION_KEY,POSITION_QUERY
        """
        + LAYER_OUTPUTS,
        prefixes=("deberta.", ""),
        stacks={"encoder": {}},
        ignore=IGNORE,
    )
    # config keys of v2's relative table that v1 does not read
    buckets_key: str | None = None
    norm_key: str | None = None
    share_key: str | None = None

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Relative attention as the `deberta_relative` position and the attention's terms;
        absolute positions as that position's own table or, without relative attention, a
        learned one."""
        self.refuse_unsupported(config)
        terms, absolute = attention_terms(config), get(config, "position_biased_input", True)
        attention = spec["attention"]
        if self.share_key is not None:
            attention["share_key"] = bool(get(config, self.share_key, False))
        if not get(config, "relative_attention", False):
            attention["terms"] = []
            attention["scale_factor"] = 1 + len(terms)  # HF scales by pos_att_type even then
            spec["position"] = {"kind": "learned", "offset": 0} if absolute else "none"
            return
        attention["terms"] = terms
        max_distance = get(config, "max_relative_positions", -1)
        buckets = get(config, self.buckets_key, -1) if self.buckets_key else -1
        norm = get(config, self.norm_key, "none") if self.norm_key else "none"
        spec["position"] = {
            "kind": "deberta_relative",
            "max_distance": max_distance if max_distance >= 1 else spec["max_len"],
            "buckets": max(buckets, 0),
            "norm": "layer_norm" in [p.strip() for p in str(norm).lower().split("|")],
            "eps": spec["norm"]["eps"],
            "absolute": bool(absolute),
        }

    def refuse_unsupported(self, config: dict[str, Any]) -> None:
        """Settings archzoo has no component for, named by their key."""
        hidden, heads = get(config, "hidden_size"), get(config, "num_attention_heads")
        refused = {
            "embedding_size": get(config, "embedding_size", hidden) != hidden,
            "pooler_hidden_size": get(config, "pooler_hidden_size", hidden) != hidden,
            "attention_head_size": get(config, "attention_head_size", hidden // heads)
            != hidden // heads,
            "talking_head": bool(get(config, "talking_head", False)),
            "conv_kernel_size": get(config, "conv_kernel_size", 0) > 0,
        }
        for key, bad in refused.items():
            if bad:
                raise ConversionError(
                    f"config.json {key}={config[key]!r} is not supported for model_type "
                    f"{self.model_type!r} (archzoo has no component for it yet)"
                )

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """The relative-attention keys back from the position and the attention."""
        position, attention = spec["position"], spec["attention"]
        kind = position if isinstance(position, str) else position["kind"]
        relative = kind == "deberta_relative"
        config["relative_attention"] = relative
        if self.share_key is not None:
            config[self.share_key] = attention["share_key"]
        if not relative:
            config["position_biased_input"] = kind == "learned"
            factor = attention.get("scale_factor") or 1 + len(attention["terms"])
            config["pos_att_type"] = ["c2p", "p2c"][: factor - 1]
            return
        config["pos_att_type"] = list(attention["terms"])
        config["position_biased_input"] = position["absolute"]
        config["max_relative_positions"] = position["max_distance"]
        if self.buckets_key:
            config[self.buckets_key] = position["buckets"] or -1
        if self.norm_key:
            config[self.norm_key] = "layer_norm" if position["norm"] else "none"

    def import_state(
        self, src: TensorSource, config: dict[str, Any], names: ZooNames, ctx: dict[str, Any]
    ) -> dict[str, Any]:
        """The newer MLM head (`legacy: false`) under the legacy head's names, then the table."""
        new = "lm_predictions.lm_head."
        for name in src.names():
            if name.startswith(new):
                part = name[len(new) :]
                legacy = "cls.predictions." + ("" if part == "bias" else "transform.") + part
                src.add(legacy, src.tensors[name])
                src.skip_exact(name)
        return super().import_state(src, config, names, ctx)


class DebertaV2Converter(DebertaConverter, model_type="deberta-v2", hf_prefix="DebertaV2"):
    fixed = spec_parts(
        "block: post_ln, norm: layernorm, ffn: mlp",
        "embedding: {kind: token, norm: true, zero_padded: true, positions_first: true}",
        "attention: {kind: disentangled, bias: qkv, position_key_bias: true, uniform_padded: true,"
        " eager: true}",
    )
    tasks = {
        **TASKS,
        "ForMultipleChoice": task(
            "kind: multiple_choice, pooling: cls, pooler: true", POOLED, fields=POOLER
        ),
    }
    tensors = table(
        EMBEDDINGS
        + f"""
        encoder.LayerNorm                                RELATIVE_NORM
        {SELF}(query_proj,key_proj,value_proj)           QKV     fuse
        {SELF}(pos_key_proj,pos_query_proj)              POSITION_KEY,POSITION_QUERY
        """
        + LAYER_OUTPUTS,
        prefixes=("deberta.", ""),
        stacks={"encoder": {}},
        ignore=(  # v3 checkpoints' replaced-token-detection head
            *IGNORE,
            *(
                f"mask_predictions.{m}.{p}"
                for m in ("dense", "LayerNorm", "classifier")
                for p in ("weight", "bias")
            ),
        ),
    )
    buckets_key = "position_buckets"
    norm_key = "norm_rel_ebd"
    share_key = "share_att_key"
