"""I-BERT (Kim et al., 2021) with quant_mode false: RoBERTa's layout and heads, its linear
layers, embeddings and norms carrying integer-inference buffers (scaling factors, activation
ranges, integer copies of the weights) that transformers only reads when quant_mode is on.
Import skips them; export writes them as transformers initialises them (zeros, and the
activation ranges +-1e-5), so the exported checkpoint loads with nothing missing."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import torch
from torch import Tensor

from .bert import RobertaConverter

# the integer-inference buffers of QuantLinear, QuantEmbedding, QuantAct and IntLayerNorm
QUANT_BUFFERS = (
    "weight_integer",
    "bias_integer",
    "fc_scaling_factor",
    "weight_scaling_factor",
    "act_scaling_factor",
    "x_min",
    "x_max",
    "shift",
)
RANGE = {"x_min": -1e-5, "x_max": 1e-5}  # QuantAct's initial activation range


class IBertConverter(RobertaConverter, model_type="ibert", hf_prefix="IBert"):
    layout_of = "roberta"  # a RoBERTa spec exports as ibert only when imported from it
    # integer GELU, softmax and norm: quant_mode; its GELU is always GELU, whatever hidden_act
    requires = {**RobertaConverter.requires, "quant_mode": False, "hidden_act": "gelu"}
    tensors = replace(
        RobertaConverter.tensors,
        prefixes=("ibert.", ""),
        ignore=(*RobertaConverter.tensors.ignore, *QUANT_BUFFERS),
    )

    def export_state(
        self,
        state: Mapping[str, Tensor],
        names: Any,
        ctx: dict[str, Any],
        prefix: str | None = None,
        task: str | None = None,
    ) -> dict[str, Tensor]:
        """The table's tensors plus every quantization buffer of transformers' model of this
        spec (its skeleton built on meta), at the values transformers initialises."""
        import transformers

        out = super().export_state(state, names, ctx, prefix, task)
        task = task or self.default_task
        config = transformers.IBertConfig(**self.hf_config(ctx, task))
        with torch.device("meta"):
            skeleton = getattr(transformers, self.hf_prefix + task)(config)
        for name, buf in skeleton.state_dict().items():
            leaf = name.rsplit(".", 1)[-1]
            if name not in out and leaf in QUANT_BUFFERS:
                out[name] = torch.full(buf.shape, RANGE.get(leaf, 0.0), dtype=buf.dtype)
        return out
