"""StableLM: Llama tensor names with LayerNorms, rotary on a share of each head (a quarter by
default), optional q/k/v biases, optional per-head QK LayerNorms each with weights of their
own, and a parallel-residual variant (one norm feeds attention and MLP)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from archzoo.parts.converter import TensorSource, Values, parse_fields, spec_parts
from archzoo.parts.hf_tensors import ZooNames

from .common import table
from .llama import ATTENTION_TENSORS, MLP_TENSORS, ROTARY_BUFFER, LlamaConverter
from .rope import rope_parameters

GATED = Values({"silu": "swiglu", "gelu": "geglu", "gelu_pytorch_tanh": "geglu_tanh"})
LLAMA_ONLY = ("attention_bias", "mlp_bias", "rms_norm_eps")
QK_NORMS = "layers.{i}.self_attn.(q_layernorm,k_layernorm)   Q_NORM,K_NORM\n"
# transformers keeps one LayerNorm per head (`norms.{h}`); archzoo one (H, hd) weight
PER_HEAD = re.compile(r"^(.*\.self_attn\.[qk]_layernorm)\.norms\.(\d+)\.weight$")
STACKED = re.compile(r"^(.*\.self_attn\.[qk]_layernorm)\.weight$")


def stack_head_norms(src: TensorSource) -> None:
    """Add each layer's per-head norm weights as one (H, hd) `..._layernorm.weight` tensor."""
    heads: dict[str, int] = {}
    for name in src.names():
        if m := PER_HEAD.match(name):
            heads[m.group(1)] = max(heads.get(m.group(1), 0), int(m.group(2)) + 1)
    for lead, n in heads.items():
        rows = [src.take(f"{lead}.norms.{h}.weight") for h in range(n)]
        if all(r is not None for r in rows):
            src.add(f"{lead}.weight", torch.stack(rows))  # (H, hd)


def split_head_norms(tensors: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """The per-head layout of an export: each (H, hd) norm weight as H `norms.{h}` weights."""
    out: dict[str, Tensor] = {}
    for name, t in tensors.items():
        m = STACKED.match(name)
        if m is None or t.dim() != 2:
            out[name] = t
            continue
        for h in range(t.shape[0]):
            out[f"{m.group(1)}.norms.{h}.weight"] = t[h].contiguous()
    return out


class StableLmConverter(LlamaConverter, model_type="stablelm", hf_prefix="StableLm"):
    requires = {}
    fixed = spec_parts(
        "embedding: token, norm: layernorm, ffn: {kind: glu, bias: false}",
        "attention: {kind: mha, fused_qkv: false, out_bias: false, qk_norm_bias: false}",
    )
    fields = (
        *(f for f in LlamaConverter.fields if f.hf not in LLAMA_ONLY),
        *parse_fields(
            """
            use_qkv_bias                attention.bias          False
            layer_norm_eps              norm.eps                1e-5
            hidden_dropout              dropout                 0.0
            hidden_act                  ffn.activation          silu    GATED
            use_parallel_residual       block                   False   BLOCK
            qk_layernorm                attention.qk_norm       False   QK_NORM
            """,
            GATED=GATED,
            BLOCK=Values({False: "pre_ln", True: {"kind": "parallel", "shared_norm": True}}),
            QK_NORM=Values({False: "none", True: "each_head"}),
        ),
    )
    tensors = table(
        ATTENTION_TENSORS + MLP_TENSORS + QK_NORMS, prefixes=("model.", ""), ignore=ROTARY_BUFFER
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Rotary base and share (a quarter unless the config says otherwise)."""
        with_default = {"partial_rotary_factor": 0.25, **config}
        if with_default["partial_rotary_factor"] is None:
            with_default["partial_rotary_factor"] = 0.25
        spec["position"] = {"kind": "rotary", **rope_parameters(with_default)}

    def import_state(
        self, src: TensorSource, config: dict[str, Any], names: ZooNames, ctx: dict[str, Any]
    ) -> dict[str, Tensor]:
        stack_head_norms(src)
        return super().import_state(src, config, names, ctx)

    def export_state(self, *args: Any, **kwargs: Any) -> dict[str, Tensor]:
        return split_head_norms(super().export_state(*args, **kwargs))
