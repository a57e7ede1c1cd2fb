"""Nemotron-H (NVIDIA, 2025): every layer one RMSNorm, one sublayer and a residual, the
sublayer picked by `layers_block_type` (or the legacy `hybrid_override_pattern`): a Mamba 2
mixer ("M"), GQA attention without positions ("*") or a squared-ReLU MLP ("-"). A mixer
layer has `ffn: none`, an MLP layer `attention: none`; the mixture-of-experts layers ("E")
are refused.

transformers calls every layer's one norm `norm`: import names it after the sublayer it
serves (the table's attention or FFN norm), export back.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from torch import Tensor

from archzoo.parts.converter import ConversionError, Converter, parse_fields, spec_parts
from archzoo.parts.hf_tensors import ZooNames
from archzoo.parts.tensor_source import TensorSource
from archzoo.specs.plan import layer_components, stack_config

from .common import HEADLESS, PAD, integer_expand, lm_task, table
from .mamba2 import _number, time_step_limit

NEMOTRON_H_TENSORS = """
        embeddings|embed_tokens                                 WORD
        layers.{i}.mixer_norm                                   ATTN_NORM
        layers.{i}.mlp_norm                                     FFN_NORM
        layers.{i}.mixer.(q_proj,k_proj,v_proj,o_proj)          Q,K,V,ATTN_OUT
        layers.{i}.mixer.(in_proj,conv1d,out_proj)              MIXER_IN,MIXER_CONV,MIXER_OUT
        layers.{i}.mixer.norm                                   MIXER_NORM
        layers.{i}.mixer.A_log                                  A_LOG       tensor
        layers.{i}.mixer.dt_bias                                DT_BIAS     tensor
        layers.{i}.mixer.D                                      SSM_D       tensor
        layers.{i}.mixer.(up_proj,down_proj)                    FC_IN,FC_OUT
        norm_f                                                  FINAL_NORM
"""
# legacy pattern letters -> layer types
PATTERN = {"M": "linear_attention", "*": "full_attention", "-": "mlp", "E": "moe"}
MLP_ONLY = {"kind": "pre_ln", "attention_norm": False, "ffn_norm": True}


class NemotronHConverter(
    Converter, model_type="nemotron_h", hf_prefix="NemotronH", family="decoder"
):
    requires = {"mamba_hidden_act": "silu", "mlp_hidden_act": "relu2"}
    fixed = spec_parts(
        "dropout: 0.0, embedding: token, position: none, norm: rmsnorm",
        "block: {kind: pre_ln, ffn_norm: false}, ffn: none",
        "attention: {kind: mamba2}",
    )
    fields = (
        *parse_fields(
            """
            vocab_size                  vocab_size
            hidden_size                 d_model
            num_attention_heads         n_heads                         32
            head_dim                    head_dim                        128
            intermediate_size           d_ff                            21504
            max_position_embeddings     max_len                         4096
            attention_dropout           attention_dropout               0.0
            layer_norm_epsilon          norm.eps,attention.norm_eps     1e-5
            mamba_head_dim              attention.head_dim              64
            ssm_state_size              attention.state_size            128
            n_groups                    attention.n_groups              8
            conv_kernel                 attention.conv_kernel           4
            use_conv_bias               attention.conv_bias             True
            mamba_proj_bias             attention.bias                  False
            chunk_size                  attention.chunk_size            128
            """
        ),
        *PAD,
    )
    tasks = {"Model": HEADLESS, "ForCausalLM": lm_task(False)}
    tensors = table(NEMOTRON_H_TENSORS, prefixes=("backbone.", "model.", ""))

    def to_spec(self, config: dict[str, Any], tensor_names: Any = ()) -> dict[str, Any]:
        """The layer count is the pattern's length (num_hidden_layers is deprecated there)."""
        kinds = layer_kinds(config)
        return super().to_spec({**config, "num_hidden_layers": len(kinds)}, tensor_names)

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """The mixer's width and step limits, and per layer its one sublayer."""
        kinds = layer_kinds(config)
        spec["n_layers"] = len(kinds)
        if "moe" in kinds:
            raise ConversionError(
                "config.json layers_block_type has mixture-of-experts layers ('moe', 'E'): "
                "Nemotron-H's latent MoE is not supported"
            )
        mixer = spec["attention"]
        mixer["d_inner"] = int(config.get("expand", 2)) * config["hidden_size"]
        heads = config.get("mamba_num_heads", 128)
        if heads * mixer["head_dim"] != mixer["d_inner"]:
            raise ConversionError(
                f"config.json mamba_num_heads x mamba_head_dim = {heads} x {mixer['head_dim']} "
                f"is not expand x hidden_size = {mixer['d_inner']}"
            )
        low, high = (_number(v) for v in config.get("time_step_limit") or (0.0, math.inf))
        mixer["dt_min"], mixer["dt_max"] = low, None if math.isinf(high) else high
        attention = {
            "kind": "mha",
            "fused_qkv": False,
            "bias": bool(config.get("attention_bias", False)),
            "n_kv_heads": config.get("num_key_value_heads") or config["num_attention_heads"],
        }
        mlp = {"kind": "mlp", "activation": "relu_squared", "bias": bool(config.get("mlp_bias"))}
        layers = []
        full = [i for i, k in enumerate(kinds) if k == "full_attention"]
        if full:
            layers.append({"select": full, "attention": attention})
        mlps = [i for i, k in enumerate(kinds) if k == "mlp"]
        if mlps:
            layers.append(
                {"select": mlps, "attention": {"kind": "none"}, "ffn": mlp, "block": MLP_ONLY}
            )
        if layers:
            spec["layers"] = layers

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """The inverse of `adjust`: `layers_block_type`, the mixer's expand and heads."""
        mixer, d = spec["attention"], spec["d_model"]
        config["expand"] = integer_expand(mixer["d_inner"], d, "NemotronHConfig")
        config["mamba_num_heads"] = mixer["d_inner"] // mixer["head_dim"]
        config.pop("time_step_limit", None)
        config.update(time_step_limit(mixer["dt_min"], mixer["dt_max"]))
        layers = layer_components(stack_config(dict(spec), "decoder"))
        kinds = {"mamba2": "linear_attention", "mha": "full_attention", "none": "mlp"}
        config["layers_block_type"] = [kinds[c["attention"]["kind"]] for c in layers]
        config["num_hidden_layers"] = len(layers)
        att = next((c["attention"] for c in layers if c["attention"]["kind"] == "mha"), None)
        config["num_key_value_heads"] = att["n_kv_heads"] if att else spec["n_heads"]
        config["attention_bias"] = bool(att["bias"]) if att else False
        mlp = next((c["ffn"] for c in layers if c["ffn"]["kind"] == "mlp"), None)
        config["mlp_bias"] = bool(mlp["bias"]) if mlp else False

    def import_state(
        self, src: TensorSource, config: dict[str, Any], names: ZooNames, ctx: dict[str, Any]
    ) -> dict[str, Any]:
        """Each layer's `norm` as the norm of the sublayer it serves (see the module)."""
        for name in list(src.names()):
            lead, _, rest = name.rpartition(".layers.")
            parts = rest.split(".")
            if lead and parts[1:] == ["norm", "weight"]:
                layer = f"{lead}.layers.{parts[0]}."
                mlp = src.has(layer + "mixer.up_proj.weight")
                src.add(layer + ("mlp_norm" if mlp else "mixer_norm") + ".weight", src.take(name))
        return super().import_state(src, config, names, ctx)

    def export_state(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """The table's per-sublayer norm names back to transformers' `norm`."""
        out: dict[str, Tensor] = {}
        for name, t in super().export_state(*args, **kwargs).items():
            for own in (".mixer_norm.weight", ".mlp_norm.weight"):
                if name.endswith(own):
                    name = name[: -len(own)] + ".norm.weight"
            out[name] = t
        return out


def layer_kinds(config: Mapping[str, Any]) -> list[str]:
    """Each layer's type: `layers_block_type` (or `layer_types`), else the legacy pattern."""
    kinds = config.get("layers_block_type") or config.get("layer_types")
    if kinds is None and config.get("hybrid_override_pattern"):
        pattern = config["hybrid_override_pattern"]
        unknown = sorted(set(pattern) - set(PATTERN))
        if unknown:
            raise ConversionError(
                f"config.json hybrid_override_pattern {pattern!r} has {unknown}; expected "
                f"letters of {''.join(PATTERN)}"
            )
        kinds = [PATTERN[c] for c in pattern]
    if not kinds:
        raise ConversionError("config.json has no layers_block_type or hybrid_override_pattern")
    unknown = sorted(set(kinds) - set(PATTERN.values()))
    if unknown:
        raise ConversionError(f"config.json layers_block_type has unknown types {unknown}")
    return list(kinds)
