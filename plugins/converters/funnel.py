"""Funnel Transformer: post-LN layers of pooled_relative attention in blocks (block_sizes), the
first layer of each block after the first pooling the stream; FunnelModel's decoder repeats
the last block's stream back to the input length, adds the first block's output and runs
num_decoder_layers full-length layers (FunnelBaseModel and the two pooled-sequence heads have
no decoder). Layer i of the stack is encoder block b's layer l, then the decoder's."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import ConversionError, Converter, Field, get, parse_fields, spec_parts
from archzoo.parts.hf_tensors import TensorTable, parse_rules

from .common import ACTIVATION, PAD, PATHS, QUESTION_ANSWERING, task, tie, token_classifier

NO_DECODER = ("BaseModel", "ForSequenceClassification", "ForMultipleChoice")
CLASSIFIER = "classifier.(linear_hidden,linear_out)  HEAD_POOLER,CLASSIFIER"
LAYER = """
    {at}.attention.(q_head,k_head,v_head,post_proj)  Q,K,V,ATTN_OUT
    {at}.attention.layer_norm                        ATTN_NORM
    {at}.attention.(r_w_bias,r_r_bias,r_kernel)      CONTENT_BIAS,DISTANCE_BIAS,DISTANCE_KERNEL  tensor
    {at}.attention.(r_s_bias,seg_embed)              SEGMENT_BIAS,SEGMENT_EMBED  tensor
    {at}.ffn.(linear_1,linear_2,layer_norm)          FC_IN,FC_OUT,FFN_NORM
"""
EMBEDDINGS = "embeddings.(word_embeddings,layer_norm)  WORD,EMBED_NORM"


def layout(spec: Mapping[str, Any]) -> tuple[list[int], int]:
    """(block_sizes, decoder layers) of a Funnel spec, from its layers: entries."""
    pools, upsample = [], None
    for entry in spec.get("layers") or []:
        attention = entry.get("attention") or {}
        if attention.get("pool", "none") != "none":
            pools += entry["select"]
        if attention.get("upsample_from") is not None:
            upsample = entry["select"][0]
    end = spec["n_layers"] if upsample is None else upsample
    starts = [0, *sorted(pools), end]
    return [b - a for a, b in zip(starts, starts[1:], strict=False)], spec["n_layers"] - end


class FunnelConverter(Converter, model_type="funnel", hf_prefix="Funnel", family="encoder"):
    requires = {"attention_type": "relative_shift"}  # "factorized": not expressed
    fixed = spec_parts(
        "block: post_ln, position: none, ffn: mlp",
        "embedding: {kind: token, norm: true, attention_types: 3}",
        "attention: {kind: pooled_relative}",
    )
    fields = (
        *parse_fields(
            """
            vocab_size             vocab_size
            d_model                d_model
            n_head                 n_heads
            d_head                 head_dim
            d_inner                d_ff
            hidden_dropout         dropout               0.1
            attention_dropout      attention_dropout     0.1
            activation_dropout     ffn.inner_dropout     0.0
            layer_norm_eps         norm.eps              1e-9
            hidden_act             ffn.activation        gelu_new  ACTIVATION
            separate_cls           attention.separate_first  True
            truncate_seq           attention.truncate    True
            """,
            ACTIVATION=ACTIVATION,
        ),
        *PAD,
    )
    tasks = {
        "Model": task("kind: none"),
        "ForMaskedLM": task(  # the default task: the first after Model
            "kind: mlm, transform: false",
            "lm_head  MLM_DECODER\nlm_head.bias  MLM_BIAS  tensor",
            fields=(tie(True),),
        ),
        "BaseModel": task("kind: none"),
        "ForPreTraining": task(
            "kind: discriminator",
            "discriminator_predictions.(dense,dense_prediction)  DISC_DENSE,DISC_PREDICTION",
            fields=(Field("hidden_act", "head.activation", "gelu_new", ACTIVATION),),
        ),
        "ForSequenceClassification": task(
            "kind: classifier, pooling: cls, pooler: true", CLASSIFIER, labels=True
        ),
        "ForMultipleChoice": task("kind: multiple_choice, pooling: cls, pooler: true", CLASSIFIER),
        "ForTokenClassification": token_classifier(),
        "ForQuestionAnswering": QUESTION_ANSWERING,
    }
    tensors = TensorTable(parse_rules(EMBEDDINGS, PATHS), ("funnel.", ""), {"encoder": {}})

    def base_table(self, spec: Mapping[str, Any] | None = None) -> TensorTable:
        """The embeddings and, for a spec, each layer under its block's (or the decoder's) name."""
        if spec is None:
            return self.tensors
        sizes, decoder = layout(spec)
        names = [f"encoder.blocks.{b}.{n}" for b, size in enumerate(sizes) for n in range(size)]
        names += [f"decoder.layers.{j}" for j in range(decoder)]
        rules = list(self.tensors.rules)
        for i, at in enumerate(names):
            paths = {
                k: v.replace("{s}", "encoder").replace("{i}", str(i)) for k, v in PATHS.items()
            }
            rules += parse_rules(LAYER.format(at=at), paths)
        return TensorTable(tuple(rules), self.tensors.prefixes, self.tensors.stacks)

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Layers from block_sizes (and the decoder's), each block's first pooling."""
        sizes = list(get(config, "block_sizes", [4, 4, 4]))
        repeats = get(config, "block_repeats", None) or [1] * len(sizes)
        if any(r != 1 for r in repeats):
            raise ConversionError(
                f"config.json block_repeats={repeats}: a block's layers run again with the "
                "same weights, which archzoo's funnel layout does not express (only 1s)"
            )
        pooling = get(config, "pooling_type", "mean")
        if pooling not in ("mean", "max"):
            raise ConversionError(f"config.json pooling_type={pooling!r}: only mean or max")
        decoder = 0 if self.task_of(config) in NO_DECODER else get(config, "num_decoder_layers", 2)
        if decoder == 0 and self.task_of(config) not in NO_DECODER:
            raise ConversionError(
                "config.json num_decoder_layers=0: FunnelModel's upsampling runs before its "
                "first decoder layer, and there is none"
            )
        starts = [sum(sizes[:b]) for b in range(1, len(sizes))]
        spec["n_layers"] = sum(sizes) + decoder
        spec["attention"]["pool_keys"] = not get(config, "pool_q_only", True)
        layers = [{"select": starts, "attention": {"pool": pooling}}] if starts else []
        if decoder:
            layers.append({"select": [sum(sizes)], "attention": {"upsample_from": sizes[0] - 1}})
        if layers:
            spec["layers"] = layers

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        sizes, decoder = layout(spec)
        config["block_sizes"], config["block_repeats"] = sizes, [1] * len(sizes)
        config["num_decoder_layers"] = decoder
        pools = [
            e["attention"]["pool"]
            for e in spec.get("layers") or []
            if (e.get("attention") or {}).get("pool", "none") != "none"
        ]
        config["pooling_type"] = pools[0] if pools else "mean"
        config["pool_q_only"] = not spec["attention"].get("pool_keys", False)
