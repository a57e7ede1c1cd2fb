"""GLM-4 (THUDM's first HF release, `glm`): Llama's layout with q/k/v biases (none on the
output), gate|up in one projection (Phi-3's), and rotary on adjacent pairs of the first half
of each head."""

from __future__ import annotations

from typing import Any

from archzoo.parts.converter import parse_fields, spec_parts

from .common import decoder_tasks, lm_task, table
from .llama import ATTENTION_TENSORS, ROTARY_BUFFER, LlamaConverter
from .rope import rope_parameters

GATE_UP_TENSORS = """
        layers.{i}.mlp.gate_up_proj                 GATE,UP     split
        layers.{i}.mlp.down_proj                    DOWN
"""


class GlmConverter(LlamaConverter, model_type="glm", hf_prefix="Glm"):
    requires = {"hidden_act": "silu"}
    fixed = {
        **LlamaConverter.fixed,
        **spec_parts(
            "attention: {kind: mha, fused_qkv: false, out_bias: false}",
            "ffn: {kind: glu, activation: swiglu, bias: false}",
        ),
    }
    fields = (
        *(f for f in LlamaConverter.fields if f.hf not in ("attention_bias", "mlp_bias")),
        *parse_fields("attention_bias  attention.bias  True"),
    )
    tasks = {
        k: v
        for k, v in decoder_tasks("ForCausalLM", lm_task(False), token="score").items()
        if k != "ForQuestionAnswering"
    }
    tensors = table(
        ATTENTION_TENSORS + GATE_UP_TENSORS,
        prefixes=("model.", ""),
        ignore=ROTARY_BUFFER,
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Rotary on adjacent pairs of half of each head (unless the config says otherwise)."""
        position = rope_parameters(config, default_fraction=0.5)
        spec["position"] = {"kind": "rotary", **position, "interleaved": True}
