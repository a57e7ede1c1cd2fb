"""BitNet b1.58 (Microsoft) as transformers' torch path runs it: Llama's layout with an RMSNorm
over the heads' output before o_proj (attn_sub_norm) and over the gated product before
down_proj (ffn_sub_norm), and a squared-ReLU gate (relu2). Weights are the unpacked ones the
checkpoint stores, used as they are; a config.json with a quantization_config (transformers'
BitNet quantizer: ternary weights and int8 activations on the fly, or packed weights) is
refused, since archzoo does not quantise."""

from __future__ import annotations

from typing import Any

from archzoo.parts.converter import ConversionError, spec_parts

from .common import table
from .llama import ATTENTION_TENSORS, MLP_TENSORS, ROTARY_BUFFER, LlamaConverter

SUB_NORMS = """
        layers.{i}.self_attn.attn_sub_norm      ATTN_SUB_NORM
        layers.{i}.mlp.ffn_sub_norm             FFN_SUB_NORM
"""


class BitNetConverter(LlamaConverter, model_type="bitnet", hf_prefix="BitNet"):
    requires = {"hidden_act": "relu2"}
    fixed = {
        **LlamaConverter.fixed,
        **spec_parts(
            "attention: {kind: mha, fused_qkv: false, out_norm: true}",
            "ffn: {kind: glu, activation: reglu_squared, inner_norm: true}",
        ),
    }
    fields = tuple(f for f in LlamaConverter.fields if f.hf != "mlp_bias")
    tasks = {k: v for k, v in LlamaConverter.tasks.items() if k in ("Model", "ForCausalLM")}
    tensors = table(
        ATTENTION_TENSORS + MLP_TENSORS + SUB_NORMS, prefixes=("model.", ""), ignore=ROTARY_BUFFER
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        quantization = config.get("quantization_config")
        if quantization:
            method = quantization.get("quant_method") if isinstance(quantization, dict) else None
            raise ConversionError(
                f"config.json quantization_config (quant_method {method!r}): transformers then "
                "quantises BitNet's linear layers (ternary weights, int8 activations, or "
                "packed weights); archzoo runs stored weights unquantised and does not import it"
            )
        super().adjust(spec, config)
