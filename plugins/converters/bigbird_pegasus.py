"""BigBird-Pegasus: Pegasus' pre-LN encoder-decoder with learned positions, BigBird's ITC
block-sparse attention in the encoder (full attention in the decoder), and the final norm of
each stack saved as `layernorm_embedding`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from archzoo.parts.converter import ConversionError, Field, spec_parts

from .bart import BART_FIELDS, BART_STACKS, BART_TENSORS, BartConverter
from .big_bird import BigBirdConverter
from .common import table
from .pegasus import PegasusConverter

# The encoder's attention sits under self_attn.self (q, k, v) and self_attn.output; the final
# norm is saved as layernorm_embedding (applied after the last layer; no embedding norm).
TENSORS = "\n".join(
    line.replace("self_attn.(q_proj,k_proj,v_proj,out_proj)", "({q},{k},{v},{out})").replace(
        "{s}.layer_norm ", "{s}.layernorm_embedding "
    )
    for line in BART_TENSORS.splitlines()
    if "EMBED_NORM" not in line
)
ENCODER = {"q": "self_attn.self.query", "k": "self_attn.self.key", "v": "self_attn.self.value"}
DECODER = {p: f"self_attn.{p}_proj" for p in ("q", "k", "v", "out")}
STACKS = {
    "encoder": {**BART_STACKS["encoder"], **ENCODER, "out": "self_attn.output"},
    "decoder": {**BART_STACKS["decoder"], **DECODER},
}
REFUSED = {
    "ForSequenceClassification": "its eos-token classification head is not modelled for the "
    "BART family yet",
    "ForCausalLM": "it is the decoder alone, which archzoo does not build for this type",
}


class BigBirdPegasusConverter(
    BartConverter, model_type="bigbird_pegasus", hf_prefix="BigBirdPegasus"
):
    """BART's tasks (base, generation, QA on the decoder's states) and field table."""

    requires = {}
    fixed = {
        **PegasusConverter.fixed,
        **spec_parts(
            "position: {kind: learned, offset: 0}, attention: {kind: mha, fused_qkv: false}"
        ),
    }
    fields = (
        *(f for f in BART_FIELDS if f.hf != "pad_token_id"),
        Field("pad_token_id", "pad_token_id", 0),
        Field("use_bias", "attention.bias", False),
    )
    tensors = table(TENSORS, prefixes=("model.", ""), stacks=STACKS)

    def task_of(self, config: dict[str, Any], tensor_names: Sequence[str] = ()) -> str:
        """The task, refusing the architectures archzoo does not build, by their reason."""
        arch = str((config.get("architectures") or [""])[0])
        for suffix, why in REFUSED.items():
            if arch == self.hf_prefix + suffix:
                raise ConversionError(f"{arch} is not supported: {why}")
        return super().task_of(config, tensor_names)

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """The encoder's attention as BigBird's (HF's eval-mode pattern, dense when short);
        the decoder's self- and cross-attention stay full."""
        spec["decoder"]["attention"] = dict(spec["attention"])
        BigBirdConverter.adjust(self, spec, config)  # type: ignore[arg-type]
        spec["attention"].pop("out_bias")  # use_bias is every projection's here

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """attention_type, block_size and num_random_blocks from the encoder's attention."""
        BigBirdConverter.adjust_config(self, config, spec)  # type: ignore[arg-type]
