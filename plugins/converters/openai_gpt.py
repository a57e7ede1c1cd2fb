"""GPT-1 (`openai-gpt`): post-LN decoder, learned positions, Conv1D (transposed) projections,
no final norm, head tied to the token table."""

from __future__ import annotations

from typing import Any

from archzoo.parts.converter import Converter, Values, parse_fields, spec_parts

from .common import HEADLESS, TWO_HEADS, lm_task, table, task
from .gpt2 import GPT2Converter

# transformers' GPT-1 `afn` names: its "gelu" is the tanh approximation (OpenAI's original),
# computed as GPT-2's gelu_new
AFN = Values({"gelu": "gelu_new", "relu": "relu", "silu": "silu", "swish": "silu"})


class OpenAIGPTConverter(
    Converter, model_type="openai-gpt", hf_prefix="OpenAIGPT", family="decoder"
):
    fixed = spec_parts(
        "embedding: token, position: learned, block: post_ln, norm: layernorm, ffn: mlp",
        "attention: {kind: mha, fused_qkv: true, bias: true, eager: true}",  # hand-written
    )
    fields = (  # GPT-2's keys less its activation, attention-scaling and FFN-width ones
        *(
            f
            for f in GPT2Converter.fields
            if f.hf not in ("activation_function", "scale_attn_weights", "n_inner")
        ),
        *parse_fields("afn  ffn.activation  gelu  AFN", AFN=AFN),
    )
    tasks = {
        "Model": HEADLESS,
        "LMHeadModel": lm_task(True),
        "ForSequenceClassification": task(
            "kind: classifier, pooling: last, pooler: false, bias: false",
            "score  CLASSIFIER",
            labels=True,
        ),
    }
    refused = {"DoubleHeadsModel": TWO_HEADS}
    tensors = table(
        """
        tokens_embed            WORD
        positions_embed         POSITION
        h.{i}.attn.(c_attn,c_proj)              QKV,ATTN_OUT    transpose   # Conv1D: (in, out)
        h.{i}.(ln_1,ln_2)                       ATTN_NORM,FFN_NORM
        h.{i}.mlp.(c_fc,c_proj)                 FC_IN,FC_OUT    transpose
        """,
        prefixes=("transformer.", ""),
        ignore=("h.{i}.attn.bias", "position_ids"),  # causal-mask and position buffers
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """transformers' GPT-1 MLP is always 4 x n_embd wide (it ignores n_inner)."""
        spec["d_ff"] = 4 * spec["d_model"]
