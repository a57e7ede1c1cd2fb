"""ESM C (EvolutionaryScale, 2024): a bidirectional pre-LN protein encoder on Llama's names:
LayerNorms (the final one and the q/k ones over all heads without a bias), rotary, SwiGLU,
each sublayer's output divided by sqrt(n_layers / 36) before the residual add, and an MLM
head of dense, exact GELU, LayerNorm and decoder. transformers' chain-aware mask
(`sequence_id`) is not an archzoo input: a row attends within its attention_mask."""

from __future__ import annotations

import math
from typing import Any

from archzoo.parts.converter import Field, spec_parts

from .common import HEADLESS, table, task, tie, token_classifier
from .llama import ATTENTION_TENSORS, MLP_TENSORS, LlamaConverter
from .qwen import QK_NORM_TENSORS


class EsmcConverter(LlamaConverter, model_type="esmc", hf_prefix="Esmc"):
    family = "encoder"
    requires = {"hidden_act": "silu"}
    fixed = spec_parts(
        "dropout: 0.0, embedding: token, block: pre_ln",
        "norm: {kind: layernorm, eps: 1.0e-5, bias: false}",
        "attention: {kind: mha, fused_qkv: false, qk_norm: full, qk_norm_bias: false}",
        "ffn: {kind: glu, activation: swiglu}",
    )
    fields = tuple(f for f in LlamaConverter.fields if f.hf != "rms_norm_eps")
    tasks = {
        "Model": HEADLESS,
        "ForMaskedLM": task(  # EsmcMaskedLMHead: GELU always, a LayerNorm with its bias
            "kind: mlm, activation: gelu, transform_norm_eps: 1.0e-5",
            "lm_head.(dense,layer_norm,decoder)  MLM_DENSE,MLM_NORM,MLM_DECODER\n"
            "lm_head.decoder.bias  MLM_BIAS  tensor",
            fields=(tie(False),),
        ),
        "ForSequenceClassification": task(  # ESM's: <cls>, dense + tanh, out_proj
            "kind: classifier, pooling: cls, pooler: true",
            "classifier.(dense,out_proj)  HEAD_POOLER,CLASSIFIER",
            labels=True,
            fields=(Field("classifier_dropout", "head.dropout", 0.1),),
        ),
        "ForTokenClassification": token_classifier("score"),
    }
    tensors = table(
        ATTENTION_TENSORS + MLP_TENSORS + QK_NORM_TENSORS,
        prefixes=("esmc.", ""),
        stacks={"encoder": {}},
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Rotary; the residual scale; the layers' norms with a bias (the final one has none)."""
        super().adjust(spec, config)
        n = spec["n_layers"]
        spec["block"] = {"kind": "pre_ln", "residual_scale": 1.0 / math.sqrt(n / 36)}
        spec["layers"] = [{"select": f"0:{n}", "norm": {"bias": True}}]
