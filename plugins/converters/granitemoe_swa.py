"""Granite MoE SWA (IBM, `granitemoe_swa`): Granite MoE Shared's experts (and its shared MLP
when shared_intermediate_size > 0) under Granite SWA's attention: a learned sink logit per
head, windows on the layers `layer_types` names and a rotary base per layer
(`layer_rope_theta`, 0: no positions). Its checkpoints keep transformers' module names
(block_sparse_moe.experts.gate_up_proj (E, 2F, D), router.weight)."""

from __future__ import annotations

from .common import table
from .granitemoe import GraniteMoeSharedConverter
from .layer_windows import SINK_ATTENTION, SINK_TENSORS, WindowedSinkLayers
from .llama import ATTENTION_TENSORS, ROTARY_BUFFER

SWA_MOE_TENSORS = """
        layers.{i}.block_sparse_moe.router                      ROUTER
        layers.{i}.block_sparse_moe.experts.gate_up_proj        EXPERTS_IN      transpose   tensor
        layers.{i}.block_sparse_moe.experts.down_proj           EXPERTS_OUT     transpose   tensor
        layers.{i}.shared_mlp.input_linear                      SHARED_UP
        layers.{i}.shared_mlp.output_linear                     SHARED_DOWN
"""


class GraniteMoeSWAConverter(
    WindowedSinkLayers,
    GraniteMoeSharedConverter,
    model_type="granitemoe_swa",
    hf_prefix="GraniteMoeSWA",
):
    fixed = {**GraniteMoeSharedConverter.fixed, **SINK_ATTENTION}
    tensors = table(
        ATTENTION_TENSORS + SWA_MOE_TENSORS + SINK_TENSORS,
        prefixes=("model.", ""),
        ignore=ROTARY_BUFFER,
    )
