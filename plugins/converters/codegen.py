"""CodeGen (Salesforce): GPT-J's layout and config keys, with q, k and v in one projection
saved in 4 model-parallel shards of [q | v | k] each (`shards_qvk`)."""

from __future__ import annotations

from archzoo.parts.converter import spec_parts

from .common import table
from .gptj import GPTJConverter

KEPT = ("Model", "ForCausalLM")  # transformers has no other CodeGen class


class CodeGenConverter(GPTJConverter, model_type="codegen", hf_prefix="CodeGen"):
    fixed = {
        **GPTJConverter.fixed,
        **spec_parts("attention: {kind: mha, fused_qkv: true, bias: false, out_bias: false}"),
    }
    tasks = {k: v for k, v in GPTJConverter.tasks.items() if k in KEPT}
    tensors = table(
        """
        wte                                 WORD
        h.{i}.ln_1                          ATTN_NORM       # one norm feeds both branches
        h.{i}.attn.qkv_proj                 QKV             shards_qvk
        h.{i}.attn.out_proj                 ATTN_OUT
        h.{i}.mlp.(fc_in,fc_out)            FC_IN,FC_OUT
        ln_f                                FINAL_NORM
        """,
        prefixes=("transformer.", ""),
        ignore=tuple(
            f"h.{{i}}.attn.{b}" for b in ("causal_mask", "masked_bias", "embed_positions")
        ),
    )
