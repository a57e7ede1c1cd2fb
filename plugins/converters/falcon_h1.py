"""Falcon-H1 (TII, 2025): every layer runs a Mamba 2 mixer and GQA attention (rotary) side by
side on one RMSNorm's output and adds their sum to the residual (`side_by_side`), then a
SwiGLU FFN; muP multipliers on the token vectors, each mixer's input and output, the keys,
the five parts of the Mamba projection, the FFN's gate and output and the logits."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import ConversionError, Converter, Field, parse_fields, spec_parts
from archzoo.parts.hf_tensors import TensorTable, parse_rules

from .bamba import BAMBA_TENSORS
from .common import HEADLESS, PAD, PATHS, SIZES, lm_task
from .mamba2 import _number, time_step_limit
from .rope import rope_config, rope_parameters

# Bamba's tensor names; the mixers' own parameters sit under side_by_side's mixers.0
# (Mamba 2) and mixers.1 (mha)
MIXERS = {"Q": 1, "K": 1, "V": 1, "ATTN_OUT": 1, "MIXER_IN": 0, "MIXER_CONV": 0}
MIXERS.update(MIXER_OUT=0, MIXER_NORM=0, A_LOG=0, DT_BIAS=0, SSM_D=0)
SIDE_PATHS = {
    **PATHS,
    **{n: PATHS[n].replace("attention.", f"attention.mixers.{k}.") for n, k in MIXERS.items()},
}


class FalconH1Converter(Converter, model_type="falcon_h1", hf_prefix="FalconH1", family="decoder"):
    requires = {"hidden_act": "silu"}
    fixed = spec_parts("dropout: 0.0, embedding: token, block: pre_ln, norm: rmsnorm")
    fields = (
        *SIZES,
        *parse_fields(
            """
            max_position_embeddings     max_len                 8192
            attention_dropout           attention_dropout       0.0
            rms_norm_eps                norm.eps                1e-5
            mlp_bias                    ffn.bias                False
            embedding_multiplier        embedding.multiplier    1.0
            """
        ),
        Field("head_dim", "head_dim", lambda c: c["hidden_size"] // c["num_attention_heads"]),
        *PAD,
    )
    tasks = {"Model": HEADLESS, "ForCausalLM": lm_task(False)}
    tensors = TensorTable(
        parse_rules(BAMBA_TENSORS, SIDE_PATHS), ("model.", ""), {"decoder": {}}, ()
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Rotary, the two mixers with their multipliers, the FFN's and the head's."""
        get = config.get
        hidden, head_dim = config["hidden_size"], spec["head_dim"]
        d_inner = get("mamba_d_ssm") or int(get("mamba_expand", 2) * hidden)
        heads = get("mamba_n_heads", 128)
        width = get("mamba_d_head", "auto")
        width = d_inner // heads if width in ("auto", None) else int(width)
        if heads * width != d_inner:
            raise ConversionError(
                f"config.json mamba_n_heads x mamba_d_head = {heads} x {width} is not the "
                f"Mamba width {d_inner}"
            )
        low, high = (_number(v) for v in get("time_step_limit") or (0.0, math.inf))
        rms, before = bool(get("mamba_rms_norm", False)), get("mamba_norm_before_gate", True)
        mamba = {
            "kind": "mamba2",
            "d_inner": d_inner,
            "head_dim": width,
            "state_size": get("mamba_d_state", 256),
            "n_groups": get("mamba_n_groups", 1),
            "conv_kernel": get("mamba_d_conv", 4),
            "conv_bias": get("mamba_conv_bias", True),
            "bias": get("mamba_proj_bias", False),
            "out_bias": get("projectors_bias", False),
            "chunk_size": get("mamba_chunk_size", 256),
            "norm_eps": get("rms_norm_eps", 1e-5),
            "dt_min": low,
            "dt_max": None if math.isinf(high) else high,
            "output_norm": ("norm_then_gate" if before else "gate_then_norm") if rms else "none",
            "projection_scales": [float(v) for v in get("ssm_multipliers") or [1.0] * 5],
        }
        key = float(get("key_multiplier", 1.0))  # keys x m: the scores' scale x m
        attention = {
            "kind": "mha",
            "fused_qkv": False,
            "bias": bool(get("attention_bias", False)),
            "out_bias": bool(get("attention_bias", False)),
            "n_kv_heads": get("num_key_value_heads") or config["num_attention_heads"],
            "scale": None if key == 1.0 else key / math.sqrt(head_dim),
        }
        spec["attention"] = {
            "kind": "side_by_side",
            "mixers": [mamba, attention],
            "input_scales": [
                float(get("ssm_in_multiplier", 1.0)),
                float(get("attention_in_multiplier", 1.0)),
            ],
            "output_scales": [
                float(get("ssm_out_multiplier", 1.0)),
                float(get("attention_out_multiplier", 1.0)),
            ],
        }
        spec["position"] = {"kind": "rotary", **rope_parameters(config)}
        gate, down = get("mlp_multipliers") or (1.0, 1.0)
        spec["ffn"] = {**spec.get("ffn", {}), "kind": "glu", "activation": "swiglu"}
        spec["ffn"].update(gate_scale=float(gate), output_scale=float(down))
        if spec["head"]["kind"] == "lm":
            spec["head"]["logit_scale"] = float(get("lm_head_multiplier", 1.0))

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """The inverse of `adjust` (a spec that is not this layout comes back different from
        the round trip, which names the part)."""
        config.update(rope_config(spec["position"]))
        side, ffn = spec["attention"], spec["ffn"]
        if side.get("kind") != "side_by_side" or len(side.get("mixers") or ()) != 2:
            return
        mamba, attention = side["mixers"]
        d_inner = mamba.get("d_inner") or 2 * spec["d_model"]
        config.update(
            mamba_d_ssm=d_inner,
            mamba_n_heads=d_inner // mamba["head_dim"],
            mamba_d_head=mamba["head_dim"],
            mamba_d_state=mamba["state_size"],
            mamba_n_groups=mamba["n_groups"],
            mamba_d_conv=mamba["conv_kernel"],
            mamba_conv_bias=mamba["conv_bias"],
            mamba_proj_bias=mamba["bias"],
            projectors_bias=mamba["bias"] if mamba["out_bias"] is None else mamba["out_bias"],
            mamba_chunk_size=mamba["chunk_size"],
            mamba_rms_norm=mamba["output_norm"] != "none",
            mamba_norm_before_gate=mamba["output_norm"] != "gate_then_norm",
            ssm_multipliers=list(mamba["projection_scales"] or [1.0] * 5),
            num_key_value_heads=attention["n_kv_heads"] or spec["n_heads"],
            attention_bias=bool(attention["bias"]),
            key_multiplier=1.0
            if attention["scale"] is None
            else attention["scale"] * math.sqrt(spec["head_dim"]),
            mlp_multipliers=[ffn.get("gate_scale", 1.0), ffn.get("output_scale", 1.0)],
        )
        ins, outs = side["input_scales"] or [1.0, 1.0], side["output_scales"] or [1.0, 1.0]
        config.update(ssm_in_multiplier=ins[0], attention_in_multiplier=ins[1])
        config.update(ssm_out_multiplier=outs[0], attention_out_multiplier=outs[1])
        config.pop("time_step_limit", None)
        config.update(time_step_limit(mamba["dt_min"], mamba["dt_max"]))
        head = spec.get("head") or {}
        if head.get("kind") == "lm":
            config["lm_head_multiplier"] = head.get("logit_scale", 1.0)
