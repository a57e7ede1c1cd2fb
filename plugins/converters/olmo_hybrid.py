"""OLMo Hybrid (Ai2): Gated DeltaNet layers (separate q/k/v/g/a/b projections, b scaled into
(0, 2) with `linear_allow_neg_eigval`) in pre-LN blocks, and on the `full_attention` layers
OLMo 2's attention block (norms after each sublayer, QK RMSNorm over all heads); a SwiGLU
FFN in every layer.

transformers names a layer's two norms by position, so `post_attention_layernorm` is the
norm before the FFN in a Gated DeltaNet layer and the norm after attention in an attention
layer: import renames an attention layer's norms before the table reads them, export back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from archzoo.parts.converter import TensorSource, parse_fields, spec_parts
from archzoo.parts.hf_tensors import ZooNames
from archzoo.specs.plan import layer_components, stack_config

from .common import HEADLESS, PAD, SIZES, layer_types, lm_task, table
from .llama import LlamaConverter

OLMO_HYBRID_TENSORS = """
        embed_tokens                                            WORD
        layers.{i}.attention_post_norm|layers.{i}.input_layernorm           ATTN_NORM
        layers.{i}.ffn_post_norm|layers.{i}.post_attention_layernorm        FFN_NORM
        layers.{i}.self_attn.(q_proj,k_proj,v_proj,o_proj)      Q,K,V,ATTN_OUT
        layers.{i}.self_attn.(q_norm,k_norm)                    Q_NORM,K_NORM
        layers.{i}.linear_attn.(q_proj,k_proj,v_proj)           GDN_QKV     fuse
        layers.{i}.linear_attn.(g_proj,b_proj,a_proj)           GDN_Z,GDN_B,GDN_A
        layers.{i}.linear_attn.(conv1d,o_norm,o_proj)           MIXER_CONV,MIXER_NORM,MIXER_OUT
        layers.{i}.linear_attn.A_log                            A_LOG       tensor
        layers.{i}.linear_attn.dt_bias                          DT_BIAS     tensor
        layers.{i}.mlp.(gate_proj,up_proj,down_proj)            GATE,UP,DOWN
        norm                                                    FINAL_NORM
"""
LAYER_TYPES = ("linear_attention", "full_attention")
# an attention layer's HF norm -> the name the table reads it under
ATTENTION_NORMS = {
    "post_attention_layernorm": "attention_post_norm",
    "post_feedforward_layernorm": "ffn_post_norm",
}
# original checkpoint names -> transformers' (transformers saves under the original ones)
ORIGINAL_NAMES = {
    "attention_layer_norm.weight": "input_layernorm.weight",
    "feedforward_layer_norm.weight": "post_attention_layernorm.weight",
}
LINEAR_NORMS = {
    "input_layernorm": "attention_post_norm",
    "post_attention_layernorm": "ffn_post_norm",
}


class OlmoHybridConverter(LlamaConverter, model_type="olmo_hybrid", hf_prefix="OlmoHybrid"):
    requires = {"hidden_act": "silu"}
    fixed = spec_parts(
        "dropout: 0.0, embedding: token, block: pre_ln, norm: rmsnorm",
        "attention: {kind: gated_deltanet, norm_eps: 1.0e-5}",
        "ffn: {kind: glu, activation: swiglu, bias: false}",
    )
    fields = (
        *SIZES,
        *parse_fields(
            """
            max_position_embeddings     max_len                 65536
            attention_dropout           attention_dropout       0.0
            rms_norm_eps                norm.eps                1e-6
            linear_conv_kernel_dim      attention.conv_kernel   4
            linear_num_key_heads        attention.n_k_heads
            linear_num_value_heads      attention.n_v_heads
            linear_key_head_dim         attention.head_k_dim
            linear_value_head_dim       attention.head_v_dim
            """
        ),
        *PAD,
    )
    tasks = {"Model": HEADLESS, "ForCausalLM": lm_task(False)}
    tensors = table(OLMO_HYBRID_TENSORS, prefixes=("model.", ""))

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Rotary, b's range, and OLMo 2's attention block on the `full_attention` layers."""
        super().adjust(spec, config)
        if config.get("linear_allow_neg_eigval", True):
            spec["attention"]["beta_scale"] = 2.0
        n = spec["n_layers"]
        kinds = layer_types(config, n, LAYER_TYPES)
        heads = config.get("num_key_value_heads") or config["num_attention_heads"]
        attention = {
            "kind": "mha",
            "fused_qkv": False,
            "qk_norm": "full",
            "bias": bool(config.get("attention_bias", False)),
            "n_kv_heads": heads,
        }
        full = [i for i, kind in enumerate(kinds) if kind == "full_attention"]
        if full:
            spec["layers"] = [{"select": full, "attention": attention, "block": "res_post_ln"}]

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """The inverse of `adjust`."""
        super().adjust_config(config, spec)
        layers = layer_components(stack_config(dict(spec), "decoder"))
        config["layer_types"] = [
            "full_attention" if c["attention"]["kind"] == "mha" else "linear_attention"
            for c in layers
        ]
        config["linear_allow_neg_eigval"] = spec["attention"]["beta_scale"] == 2.0
        att = next((c["attention"] for c in layers if c["attention"]["kind"] == "mha"), None)
        config["num_key_value_heads"] = att["n_kv_heads"] if att else spec["n_heads"]
        config["attention_bias"] = bool(att["bias"]) if att else False
        mixer = spec["attention"]
        config["linear_num_key_heads"] = mixer["n_k_heads"] or spec["n_heads"]
        config["linear_num_value_heads"] = mixer["n_v_heads"] or config["linear_num_key_heads"]
        config["linear_key_head_dim"] = mixer["head_k_dim"] or spec["head_dim"]
        config["linear_value_head_dim"] = mixer["head_v_dim"] or config["linear_key_head_dim"]

    def import_state(
        self, src: TensorSource, config: dict[str, Any], names: ZooNames, ctx: dict[str, Any]
    ) -> dict[str, Any]:
        """Each layer's two norms under the names the table reads (see the module), from
        transformers' names or the original checkpoints' (OLMo-core's norm names and a
        convolution per q, k and v, which transformers also writes)."""
        for name in list(src.names()):
            for old, new in ORIGINAL_NAMES.items():
                if name.endswith(old):
                    src.add(name[: -len(old)] + new, src.take(name))
            if name.endswith("linear_attn.q_conv1d.weight"):
                lead = name[: -len("q_conv1d.weight")]
                parts = [src.take(lead + f"{p}_conv1d.weight") for p in "qkv"]
                if all(p is not None for p in parts):
                    src.add(lead + "conv1d.weight", torch.cat(parts))
        for name in list(src.names()):
            if not name.endswith("layernorm.weight") or ".layers." not in name:
                continue
            lead, _, rest = name.rpartition(".layers.")
            index, norm = rest.split(".")[0], rest.split(".")[1]
            layer = f"{lead}.layers.{index}."
            renames = (
                ATTENTION_NORMS if src.has(layer + "self_attn.q_proj.weight") else LINEAR_NORMS
            )
            if norm in renames:
                src.add(layer + renames[norm] + ".weight", src.take(name))
        return super().import_state(src, config, names, ctx)

    def export_state(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """transformers' names for each kind of layer's norms (the table writes every alias:
        only the renamed ones are kept), and q, k, v split at their own widths (the table's
        fuse splits evenly)."""
        state = super().export_state(*args, **kwargs)
        spec = args[2] if len(args) > 2 else kwargs["ctx"]
        mixer = spec["attention"]
        hk = mixer["n_k_heads"] or spec["n_heads"]
        dk = mixer["head_k_dim"] or spec["head_dim"]
        value = (mixer["n_v_heads"] or hk) * (mixer["head_v_dim"] or dk)
        out: dict[str, Tensor] = {}
        for name, t in state.items():
            lead, _, rest = name.rpartition(".layers.")
            parts = rest.split(".")
            if not lead or len(parts) < 3:
                out[name] = t
                continue
            layer = f"{lead}.layers.{parts[0]}."
            if parts[1] in ("input_layernorm", "post_attention_layernorm"):
                continue  # an alias of the renamed norm below
            if parts[1] in ("attention_post_norm", "ffn_post_norm"):
                attends = layer + "self_attn.q_proj.weight" in state
                renames = ATTENTION_NORMS if attends else LINEAR_NORMS
                out[layer + next(k for k, v in renames.items() if v == parts[1]) + ".weight"] = t
            elif rest.endswith("linear_attn.q_proj.weight"):
                qkv = torch.cat([state[layer + f"linear_attn.{p}_proj.weight"] for p in "qkv"])
                q, k, v = qkv.split([hk * dk, hk * dk, value])
                out.update(
                    {
                        layer + f"linear_attn.{p}_proj.weight": w
                        for p, w in zip("qkv", (q, k, v), strict=True)
                    }
                )
            elif not rest.endswith(("linear_attn.k_proj.weight", "linear_attn.v_proj.weight")):
                out[name] = t
        return out
