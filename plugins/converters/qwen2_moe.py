"""Qwen2-MoE (Qwen1.5-MoE): Qwen2's attention (q/k/v biases, `qkv_bias`) and Qwen3-MoE's
routed SwiGLU experts, plus one shared SwiGLU expert of its own width whose output is scaled
by sigmoid(w . x) (`shared_expert_gate`); with `use_sliding_window`, its even layers below
`max_window_layers` slide."""

from __future__ import annotations

from archzoo.parts.converter import spec_parts

from .common import LM_HEAD, table
from .llama import ATTENTION_TENSORS, MLP_TENSORS, LlamaConverter
from .mixtral import MOE_TENSORS, moe_fields
from .qwen import Qwen2Converter, Qwen3MoeConverter

SHARED_TENSORS = """
        layers.{i}.mlp.shared_expert.(gate_proj,up_proj)    SHARED_UP   fuse
        layers.{i}.mlp.shared_expert.down_proj              SHARED_DOWN
        layers.{i}.mlp.shared_expert_gate                   SHARED_GATE
"""


class Qwen2MoeConverter(Qwen3MoeConverter, model_type="qwen2_moe", hf_prefix="Qwen2Moe"):
    fixed = {
        **Qwen2Converter.fixed,
        **spec_parts(
            "ffn: {kind: moe, expert: glu, activation: swiglu, router: softmax_topk,"
            " n_shared: 1, shared_gate: true}"
        ),
    }
    fields = moe_fields(
        tuple(f for f in LlamaConverter.fields if f.hf != "attention_bias"),
        """
        moe_intermediate_size               ffn.d_expert
        shared_expert_intermediate_size     ffn.d_shared
        norm_topk_prob                      ffn.normalize       False
        qkv_bias                            attention.bias      True
        """,
    )
    tensors = table(
        ATTENTION_TENSORS + MLP_TENSORS + MOE_TENSORS + SHARED_TENSORS,
        LM_HEAD,
        prefixes=("model.", ""),
    )
    reads_layer_types = True  # Qwen2MoeConfig's layer_types: which layers slide

    def slides(self, i: int, window_layers: int) -> bool:
        """transformers' Qwen2-MoE rule: the even layers below `max_window_layers`."""
        return i % 2 == 0 and i < window_layers

    def window_layers(self, local: list[int]) -> int:
        return local[-1] + 1
