"""GPTBigCode (SantaCoder, StarCoder): GPT-2's layout with nn.Linear projections and multi-query
attention (one shared key/value head) in a fused c_attn."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from archzoo.parts.converter import Converter, Values, parse_fields, spec_parts
from archzoo.parts.hf_tensors import PARAMS, Rule
from archzoo.parts.hf_transforms import HeadsInterleaved, Tensors, Transform

from . import paths
from .common import ACTIVATION, GPT2_TABLES_AND_NORMS, TIED_CAUSAL_LM, table
from .gpt2 import GPT2Converter


class FusedQKV(Transform):
    """c_attn rows: [q | k | v] with one kv head (multi_query), per head [h: q|k|v] otherwise."""

    per_head = HeadsInterleaved()

    def forward(self, ts: Tensors, ctx: dict[str, Any]) -> Tensors:
        mqa = ctx["attention"]["n_kv_heads"] == 1
        return list(ts) if mqa else self.per_head.forward(ts, ctx)

    def inverse(self, ts: Tensors, ctx: dict[str, Any]) -> Tensors:
        mqa = ctx["attention"]["n_kv_heads"] == 1
        return list(ts) if mqa else self.per_head.inverse(ts, ctx)


BASE_TABLE = table(
    GPT2_TABLES_AND_NORMS
    + """
    h.{i}.attn.c_proj                   ATTN_OUT
    h.{i}.mlp.(c_fc,c_proj)             FC_IN,FC_OUT
    """,
    prefixes=("transformer.", ""),
    ignore=("h.{i}.attn.bias", "h.{i}.attn.masked_bias"),  # mask buffers (old versions)
)
QKV_RULES = tuple(
    Rule((f"h.{{i}}.attn.c_attn.{p}",), (f"{paths.QKV}.{p}",), FusedQKV()) for p in PARAMS
)


class GPTBigCodeConverter(
    Converter, model_type="gpt_bigcode", hf_prefix="GPTBigCode", family="decoder"
):
    requires = {"add_cross_attention": False}
    fixed = spec_parts(
        "embedding: token, position: learned, block: pre_ln, norm: layernorm, ffn: mlp",
        "attention: {kind: mha, fused_qkv: true, bias: true}",
    )
    fields = (  # GPT-2's keys with its own GELU default, plus multi-query
        *(f for f in GPT2Converter.fields if f.hf != "activation_function"),
        *parse_fields(
            """
            activation_function     ffn.activation          gelu_pytorch_tanh   ACTIVATION
            multi_query             attention.n_kv_heads    True                MQA
            """,
            ACTIVATION=ACTIVATION,
            MQA=Values({True: 1, False: None}),  # one key/value head, or one per query head
        ),
    )
    tasks = TIED_CAUSAL_LM
    tensors = replace(BASE_TABLE, rules=BASE_TABLE.rules + QKV_RULES)
