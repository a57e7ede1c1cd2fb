"""OLMo (the first): Llama's tensor names with LayerNorms that have neither scale nor shift
(no tensors), computed in float32; q/k/v clipping (clip_qkv) is refused."""

from __future__ import annotations

from archzoo.parts.converter import spec_parts

from .common import table
from .llama import MLP_TENSORS, ROTARY_BUFFER, LlamaConverter


class OlmoConverter(LlamaConverter, model_type="olmo", hf_prefix="Olmo"):
    requires = {"hidden_act": "silu", "clip_qkv": None}
    fixed = {
        **LlamaConverter.fixed,
        **spec_parts(
            "norm: {kind: layernorm, scale: false, bias: false, eps: 1.0e-5}",
            "ffn: {kind: glu, activation: swiglu, bias: false}",
        ),
    }
    fields = tuple(f for f in LlamaConverter.fields if f.hf not in ("rms_norm_eps", "mlp_bias"))
    tasks = {
        k: v
        for k, v in LlamaConverter.tasks.items()
        if k in ("Model", "ForCausalLM", "ForSequenceClassification")
    }
    tensors = table(
        """
        embed_tokens                                            WORD
        layers.{i}.self_attn.(q_proj,k_proj,v_proj,o_proj)      Q,K,V,ATTN_OUT
        """
        + MLP_TENSORS,
        prefixes=("model.", ""),
        ignore=ROTARY_BUFFER,
    )
