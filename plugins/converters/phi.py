"""Phi-1 and Phi-2: attention and MLP in parallel on one shared LayerNorm (GPT-J's block),
q/k/v/dense with biases, rotary on half of each head (halves, not pairs), an optional
LayerNorm over each head's queries and keys, and an untied LM head with a bias."""

from __future__ import annotations

from typing import Any

from archzoo.parts.converter import Values, parse_fields, spec_parts

from .common import ACTIVATION, decoder_tasks, table, task, tie
from .llama import ROTARY_BUFFER, LlamaConverter
from .rope import rope_parameters

LLAMA_ONLY = ("attention_bias", "mlp_bias", "rms_norm_eps")
LM = task("kind: lm, bias: true", "lm_head  LM_PROJ", fields=(tie(False),))


class PhiConverter(LlamaConverter, model_type="phi", hf_prefix="Phi"):
    requires = {}
    fixed = spec_parts(
        "embedding: token, norm: layernorm, ffn: {kind: mlp, bias: true}",
        "block: {kind: parallel, shared_norm: true, branches_first: true}",
        "attention: {kind: mha, fused_qkv: false, bias: true, out_bias: true}",
    )
    fields = (
        *(f for f in LlamaConverter.fields if f.hf not in LLAMA_ONLY),
        *parse_fields(
            """
            resid_pdrop         dropout                 0.0
            embd_pdrop          embedding.dropout       0.0
            layer_norm_eps      norm.eps                1e-5
            hidden_act          ffn.activation          gelu_new    ACTIVATION
            qk_layernorm        attention.qk_norm       False       QK_NORM
            """,
            ACTIVATION=ACTIVATION,
            QK_NORM=Values({False: "none", True: "head"}),
        ),
    )
    tasks = {
        k: v
        for k, v in decoder_tasks("ForCausalLM", LM, token="score").items()
        if k != "ForQuestionAnswering"
    }
    tensors = table(
        """
        embed_tokens                                            WORD
        layers.{i}.input_layernorm                              ATTN_NORM
        layers.{i}.self_attn.(q_proj,k_proj,v_proj,dense)       Q,K,V,ATTN_OUT
        layers.{i}.self_attn.(q_layernorm,k_layernorm)          Q_NORM,K_NORM
        layers.{i}.mlp.(fc1,fc2)                                FC_IN,FC_OUT
        final_layernorm                                         FINAL_NORM
        """,
        prefixes=("model.", ""),
        ignore=ROTARY_BUFFER,
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Rotary on half of each head unless the config says otherwise."""
        spec["position"] = {"kind": "rotary", **rope_parameters(config, default_fraction=0.5)}
