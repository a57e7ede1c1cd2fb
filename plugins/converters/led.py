"""LED (Beltagy et al., 2020): BART's post-LN encoder-decoder whose encoder attends through
Longformer's sliding window (global rows from `global_attention_mask`, with their own q/k/v)
over up to 16k learned positions; the decoder keeps full attention and 1k positions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import ConversionError, Field, get

from .bart import BART_FIELDS, BART_STACKS, BART_TENSORS, LM_FIXED_BIAS, BartConverter, bart_parts
from .common import HEADLESS, QUESTION_ANSWERING, table

LONG = "self_attn.longformer_self_attn."  # LEDEncoderAttention: Longformer's, then `output`
TENSORS = (  # per-stack attention names; only the encoder has global projections
    BART_TENSORS.replace("self_attn.(q_proj,k_proj,v_proj,out_proj)", "({q},{k},{v},{out})")
    + "{s}.layers.{i}.({qg},{kg},{vg})    Q_GLOBAL,K_GLOBAL,V_GLOBAL\n"
)
NAMES = {"q": "query", "k": "key", "v": "value"}
GLOBAL = {f"{p}g": f"{LONG}{name}_global" for p, name in NAMES.items()}
STACKS = {
    "encoder": {
        **BART_STACKS["encoder"],
        **{p: LONG + name for p, name in NAMES.items()},
        "out": "self_attn.output",
        **GLOBAL,
    },
    "decoder": {
        **BART_STACKS["decoder"],
        **{p: f"self_attn.{p}_proj" for p in ("q", "k", "v", "out")},
        **GLOBAL,
    },
}
POSITIONS = (
    Field("max_encoder_position_embeddings", "max_len", 16384),
    Field("max_decoder_position_embeddings", "decoder.max_len", 1024),
)


class LEDConverter(BartConverter, model_type="led", hf_prefix="LED"):
    requires = {}
    fixed = bart_parts("post_ln", "{kind: token, norm: true}", "{kind: learned, offset: 0}")
    fields = (*(f for f in BART_FIELDS if f.hf != "max_position_embeddings"), *POSITIONS)
    tasks = {
        "Model": HEADLESS,
        "ForConditionalGeneration": LM_FIXED_BIAS,
        "ForQuestionAnswering": QUESTION_ANSWERING,
    }
    tensors = table(TENSORS, prefixes=("led.", ""), stacks=STACKS)

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """The decoder's attention stays full; the encoder's is Longformer's, one window."""
        spec["decoder"]["attention"] = dict(spec["attention"])
        windows = get(config, "attention_window", 512)
        if isinstance(windows, list):
            if len(set(windows)) != 1:
                raise ConversionError(
                    f"config.json attention_window={windows}: LED with a window per layer is "
                    "not supported (one window for every encoder layer)"
                )
            windows = windows[0]
        spec["attention"] = {
            "kind": "longformer",
            "fused_qkv": False,
            "bias": True,
            "window": windows,
            "global_projections": True,
            "zero_padded_queries": True,
        }

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        config["attention_window"] = spec["attention"]["window"]
