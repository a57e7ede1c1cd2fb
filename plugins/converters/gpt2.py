"""GPT-2: pre-LN decoder, learned positions, Conv1D (transposed) projections; with
`scale_attn_by_inverse_layer_idx`, layer i's scores are further divided by i + 1 (per-layer
`attention.scale` entries)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import Converter, Field, Values, parse_fields, spec_parts
from archzoo.specs.plan import layer_components, stack_config

from .common import (
    ACTIVATION,
    GPT2_TABLES_AND_NORMS,
    PAD,
    TWO_HEADS,
    decoder_tasks,
    lm_task,
    table,
)


class GPT2Converter(Converter, model_type="gpt2", hf_prefix="GPT2", family="decoder"):
    fixed = spec_parts(
        "embedding: token, position: learned, block: pre_ln, norm: layernorm, ffn: mlp",
        "attention: {kind: mha, fused_qkv: true, bias: true}",
    )
    fields = (
        *parse_fields(
            """
            vocab_size              vocab_size
            n_embd                  d_model
            n_layer                 n_layers
            n_head                  n_heads
            n_positions             max_len
            resid_pdrop             dropout             0.1
            attn_pdrop              attention_dropout   0.1
            embd_pdrop              embedding.dropout   0.1
            layer_norm_epsilon      norm.eps            1e-5
            activation_function     ffn.activation      gelu_new    ACTIVATION
            scale_attn_weights      attention.scale     True        SCALE
            """,
            ACTIVATION=ACTIVATION,
            SCALE=Values({True: None, False: 1.0}),  # False: unscaled scores
        ),
        Field("n_inner", "d_ff", lambda c: 4 * c["n_embd"]),
        *PAD,
    )
    tasks = decoder_tasks("LMHeadModel", lm_task(True))
    refused = {"DoubleHeadsModel": TWO_HEADS}
    tensors = table(
        GPT2_TABLES_AND_NORMS
        + """
        h.{i}.attn.(c_attn,c_proj)      QKV,ATTN_OUT    transpose   # Conv1D stores (in, out)
        h.{i}.mlp.(c_fc,c_proj)         FC_IN,FC_OUT    transpose
        """,
        prefixes=("transformer.", ""),
        ignore=("h.{i}.attn.bias", "h.{i}.attn.masked_bias"),  # causal-mask buffers
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """`scale_attn_by_inverse_layer_idx`: layer i scales its scores by scale / (i + 1),
        computed as transformers does (head_dim^-1/2, or 1 unscaled, then / float(i + 1)).
        `reorder_and_upcast_attn` changes only how transformers' eager kernel rounds 16-bit
        scores (its SDPA path ignores it): the same function, nothing to set."""
        if not config.get("scale_attn_by_inverse_layer_idx"):
            return
        layers = spec.setdefault("layers", [])
        for i in range(1, spec["n_layers"]):  # layer 0 divides by 1: the stack's own scale
            layers.append({"select": i, "attention": {"scale": inverse_layer_scale(spec, i)}})

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """Layers whose scale differs from the stack's as `scale_attn_by_inverse_layer_idx`
        (export's round trip checks that they follow scale / (i + 1))."""
        own = spec["attention"].get("scale")
        layers = layer_components(stack_config(dict(spec), "decoder"))
        by_layer = any(c["attention"].get("scale") != own for c in layers)
        config["scale_attn_by_inverse_layer_idx"] = by_layer


def inverse_layer_scale(spec: Mapping[str, Any], i: int) -> float:
    """Layer i's score scale under `scale_attn_by_inverse_layer_idx`, in transformers' order."""
    scale = spec["attention"].get("scale")
    base = (spec["d_model"] // spec["n_heads"]) ** -0.5 if scale is None else float(scale)
    return base / float(i + 1)
