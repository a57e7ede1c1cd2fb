"""VaultGemma: Gemma 2 with one norm before each sublayer only (pre-LN: no norms after
attention or the MLP); its soft-caps, score scale and sliding layers are Gemma 2's."""

from __future__ import annotations

from archzoo.parts.converter import spec_parts

from .common import table
from .gemma2 import Gemma2Converter
from .llama import MLP_TENSORS, ROTARY_BUFFER


class VaultGemmaConverter(Gemma2Converter, model_type="vaultgemma", hf_prefix="VaultGemma"):
    fixed = {**Gemma2Converter.fixed, **spec_parts("block: pre_ln")}
    tasks = {k: v for k, v in Gemma2Converter.tasks.items() if k in ("Model", "ForCausalLM")}
    tensors = table(
        """
        embed_tokens                            WORD
        layers.{i}.input_layernorm              ATTN_NORM
        layers.{i}.self_attn.(q_proj,k_proj,v_proj,o_proj)      Q,K,V,ATTN_OUT
        layers.{i}.pre_feedforward_layernorm    FFN_NORM
        norm                                    FINAL_NORM
        """
        + MLP_TENSORS,
        prefixes=("model.", ""),
        ignore=ROTARY_BUFFER,
    )
