"""GPT-Neo: GPT-2's layout with unscaled scores, separate q/k/v (no bias), and layers that
alternate global (dense causal) and local (sliding window of `window_size` keys) attention."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import ConversionError, Converter, Field, get, parse_fields, spec_parts
from archzoo.specs.plan import layer_components, stack_config

from .common import ACTIVATION, GPT2_TABLES_AND_NORMS, PAD, TIED_CAUSAL_LM, table

# q/k/v without bias, out_proj with bias, no 1/sqrt(head_dim) scaling of the scores
PROJECTIONS = {"fused_qkv": False, "bias": False, "out_bias": True, "scale": 1.0}


def attention_layers(config: dict[str, Any]) -> list[str]:
    """'global' / 'local' per layer, from `attention_layers` or expanded `attention_types`."""
    layers = config.get("attention_layers")
    if not layers:
        layers = []
        for kinds, repeat in get(config, "attention_types"):
            layers += list(kinds) * repeat
    n = get(config, "num_layers")
    if len(layers) != n or set(layers) - {"global", "local"}:
        raise ConversionError(
            f"config.json attention_layers must name 'global' or 'local' for each of {n} "
            f"layers, got {layers!r}"
        )
    return layers


class GPTNeoConverter(Converter, model_type="gpt_neo", hf_prefix="GPTNeo", family="decoder"):
    fixed = spec_parts(
        "embedding: token, position: learned, block: pre_ln, norm: layernorm, ffn: mlp",
    )
    fields = (
        *parse_fields(
            """
            vocab_size                  vocab_size
            hidden_size                 d_model
            num_layers                  n_layers
            num_heads                   n_heads
            max_position_embeddings     max_len
            resid_dropout               dropout             0.0
            attention_dropout           attention_dropout   0.0
            embed_dropout               embedding.dropout   0.0
            layer_norm_epsilon          norm.eps            1e-5
            activation_function         ffn.activation      gelu_new    ACTIVATION
            """,
            ACTIVATION=ACTIVATION,
        ),
        Field("intermediate_size", "d_ff", lambda c: 4 * c["hidden_size"]),
        *PAD,
    )
    tasks = TIED_CAUSAL_LM
    tensors = table(
        GPT2_TABLES_AND_NORMS
        + """
        h.{i}.attn.attention.(q_proj,k_proj,v_proj,out_proj)    Q,K,V,ATTN_OUT
        h.{i}.mlp.(c_fc,c_proj)                                 FC_IN,FC_OUT
        """,
        prefixes=("transformer.", ""),
        ignore=("h.{i}.attn.attention.bias", "h.{i}.attn.attention.masked_bias"),  # mask buffers
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Layers alternate global and local attention: the local ones as a layer override."""
        kinds = attention_layers(config)
        local = {"kind": "local", "window": get(config, "window_size", 256), **PROJECTIONS}
        local_layers = [i for i, kind in enumerate(kinds) if kind == "local"]
        spec["attention"] = {"kind": "mha", **PROJECTIONS}
        spec["layers"] = [{"select": local_layers, "attention": local}] if local_layers else []
        if len(local_layers) == len(kinds):
            spec["attention"], spec["layers"] = local, []

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """`attention_layers` from each layer's attention kind, the local layers' window."""
        layers = [c["attention"] for c in layer_components(stack_config(dict(spec), "decoder"))]
        kinds = ["local" if a["kind"] == "local" else "global" for a in layers]
        config["attention_layers"] = kinds
        config["attention_types"] = [[[kind], 1] for kind in kinds]
        config["window_size"] = next((a["window"] for a in layers if a["kind"] == "local"), 256)
