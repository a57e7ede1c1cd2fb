"""Granite SWA (IBM, `granite_swa`): Granite's four multipliers with a learned sink logit per
head (its sigmoid(logsumexp - sink) rescaling is GPT-OSS's extra softmax logit), windows of
`sliding_window` keys on the layers `layer_types` names (default: all but every fourth) and a
rotary base per layer (`layer_rope_theta`; 0: the layer sees no positions)."""

from __future__ import annotations

from .common import table
from .granite import GraniteConverter
from .layer_windows import SINK_ATTENTION, SINK_TENSORS, WindowedSinkLayers
from .llama import ATTENTION_TENSORS, MLP_TENSORS, ROTARY_BUFFER


class GraniteSWAConverter(
    WindowedSinkLayers, GraniteConverter, model_type="granite_swa", hf_prefix="GraniteSWA"
):
    fixed = {**GraniteConverter.fixed, **SINK_ATTENTION}
    tensors = table(
        ATTENTION_TENSORS + MLP_TENSORS + SINK_TENSORS,
        prefixes=("model.", ""),
        ignore=ROTARY_BUFFER,
    )
