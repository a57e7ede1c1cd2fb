"""Cohere (Command R): attention and SwiGLU MLP in parallel on one shared LayerNorm without a
shift, rotary on adjacent pairs (in float32), an optional per-head QK LayerNorm, and a tied
head whose logits are multiplied by `logit_scale`."""

from __future__ import annotations

from typing import Any

from archzoo.parts.converter import Field, Values, parse_fields, spec_parts

from .common import TASK_LM, decoder_tasks, table, tie
from .common import task as make_task
from .llama import MLP_TENSORS, ROTARY_BUFFER, LlamaConverter
from .qwen import QK_NORM_TENSORS
from .rope import rope_parameters

LM = make_task(
    "kind: lm", TASK_LM, fields=(tie(True), Field("logit_scale", "head.logit_scale", 0.0625))
)


class CohereConverter(LlamaConverter, model_type="cohere", hf_prefix="Cohere"):
    fixed = spec_parts(
        "dropout: 0.0, embedding: token, norm: {kind: layernorm, bias: false}",
        "block: {kind: parallel, shared_norm: true}",
        "attention: {kind: mha, fused_qkv: false, qk_norm_bias: false}",
        "ffn: {kind: glu, activation: swiglu, bias: false}",
    )
    fields = (
        *(f for f in LlamaConverter.fields if f.hf not in ("rms_norm_eps", "mlp_bias")),
        *parse_fields(
            """
            layer_norm_eps      norm.eps                1e-5
            use_qk_norm         attention.qk_norm       False   QK_NORM
            """,
            QK_NORM=Values({False: "none", True: "each_head"}),
        ),
    )
    tasks = {
        k: v for k, v in decoder_tasks("ForCausalLM", LM).items() if k in ("Model", "ForCausalLM")
    }
    tensors = table(
        """
        embed_tokens                            WORD
        layers.{i}.input_layernorm              ATTN_NORM       # one norm feeds both branches
        layers.{i}.self_attn.(q_proj,k_proj,v_proj,o_proj)      Q,K,V,ATTN_OUT
        norm                                    FINAL_NORM
        """
        + MLP_TENSORS
        + QK_NORM_TENSORS,
        prefixes=("model.", ""),
        ignore=ROTARY_BUFFER,
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Rotary on adjacent pairs, rotated in float32 and rounded once."""
        position = rope_parameters(config)
        spec["position"] = {"kind": "rotary", **position, "interleaved": True, "rotate_fp32": True}
