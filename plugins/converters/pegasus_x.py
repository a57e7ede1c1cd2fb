"""PEGASUS-X: Pegasus' pre-LN layout without attention biases, whose encoder places
`num_global_tokens` learned vectors before the tokens and attends globally-locally in
blocks of `block_size`, every other layer staggered by half a block."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import ConversionError, Converter, get, spec_parts

from .bart import BART_FIELDS, BART_STACKS, BART_TENSORS
from .common import HEADLESS, lm_task, table
from .longt5 import encoder_part

GLOBAL_TENSORS = """
    {s}.embed_global                              GLOBAL_TOKENS
    {s}.layers.{i}.global_self_attn_layer_norm    PREFIX_NORM
"""


class PegasusXConverter(
    Converter, model_type="pegasus_x", hf_prefix="PegasusX", family="encoder-decoder"
):
    fixed = spec_parts(
        "tie_embeddings: true, block: pre_ln, ffn: mlp",
        "embedding: token, norm: {kind: layernorm, eps: 1.0e-5}",
        "position: {kind: sinusoidal, layout: halves, frequencies: tensor2tensor}",
        "attention: {kind: mha, fused_qkv: false, bias: false}",
    )
    fields = BART_FIELDS
    tasks = {"Model": HEADLESS, "ForConditionalGeneration": lm_task(True)}
    tensors = table(BART_TENSORS + GLOBAL_TENSORS, prefixes=("model.", ""), stacks=BART_STACKS)

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """The encoder's global tokens, their norm and its global-local attention; odd
        layers staggered (stagger_local_blocks)."""
        n_global = int(get(config, "num_global_tokens", 32))
        if n_global < 1:
            raise ConversionError(
                f"config.json num_global_tokens={n_global}: PEGASUS-X needs at least one"
            )
        block = int(get(config, "block_size", 512))
        attention = {
            **spec["attention"],
            "kind": "global_local",
            "block_size": block,
            "scale_at": "query",
        }
        encoder = spec.setdefault("encoder", {})
        encoder["attention"] = attention
        encoder["embedding"] = {**spec["embedding"], "global_tokens": n_global}
        encoder["block"] = {"kind": "pre_ln", "prefix_attention_norm": True}
        if get(config, "stagger_local_blocks", True) and spec["n_layers"] > 1:
            encoder["layers"] = [{"select": "1::2", "attention": {"stagger": True}}]

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        attention = encoder_part(spec, "attention") or {}
        embedding = encoder_part(spec, "embedding") or {}
        config["num_global_tokens"] = embedding.get("global_tokens")
        config["block_size"] = attention.get("block_size")
        layers = encoder_part(spec, "layers") or []
        config["stagger_local_blocks"] = any(
            (entry.get("attention") or {}).get("stagger") for entry in layers
        )
