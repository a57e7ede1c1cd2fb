"""OPT: learned positions offset by 2, separate q/k/v, ReLU MLP; pre-LN (125m, 1.3b, ...) or
post-LN without a final norm (350m); a narrower token table (`word_embed_proj_dim`) reached
through project_in / project_out."""

from __future__ import annotations

from typing import Any

from archzoo.parts.converter import (
    ConversionError,
    Converter,
    Values,
    get,
    parse_fields,
    spec_parts,
)

from .common import ACTIVATION, PAD, decoder_tasks, table, task, tie

# project_out sits in HF's base model; archzoo keeps it where the tied head needs it
LM_WITH_PROJECTION = task(
    "kind: lm", "lm_head  LM_PROJ", base="decoder.project_out  LM_DOWN", fields=(tie(True),)
)


class OPTConverter(Converter, model_type="opt", hf_prefix="OPT", family="decoder"):
    requires = {"_remove_final_layer_norm": False, "layer_norm_elementwise_affine": True}
    fixed = spec_parts(
        "embedding: {kind: token, dropout: 0.0}, position: {kind: learned, offset: 2}, ffn: mlp",
        "norm: {kind: layernorm, eps: 1.0e-5}, attention: {kind: mha, fused_qkv: false, scale_at: query}",
    )
    fields = (
        *parse_fields(
            """
            vocab_size                  vocab_size
            hidden_size                 d_model
            num_hidden_layers           n_layers
            num_attention_heads         n_heads
            ffn_dim                     d_ff
            max_position_embeddings     max_len             2048
            dropout                     dropout             0.1
            attention_dropout           attention_dropout   0.0
            enable_bias                 attention.bias,ffn.bias     True
            do_layer_norm_before        block               True        BLOCK
            activation_function         ffn.activation      relu        ACTIVATION
            """,
            ACTIVATION=ACTIVATION,
            BLOCK=Values({True: "pre_ln", False: "post_ln"}),  # post-LN: OPT-350m, no final norm
        ),
        *PAD,
    )
    tasks = {
        **decoder_tasks("ForCausalLM", LM_WITH_PROJECTION),
        # HF's base model ends with project_out when the table is narrower
        "Model": task("kind: none", base="decoder.project_out  LM_DOWN"),
    }
    tensors = table(
        """
        decoder.embed_tokens                WORD
        decoder.embed_positions             POSITION        # (max_len + 2, d): rows 0, 1 unused
        decoder.project_in                  EMBED_PROJECT
        decoder.layers.{i}.self_attn.(q_proj,k_proj,v_proj,out_proj)    Q,K,V,ATTN_OUT
        decoder.layers.{i}.(self_attn_layer_norm,final_layer_norm)     ATTN_NORM,FFN_NORM
        decoder.layers.{i}.(fc1,fc2)        FC_IN,FC_OUT
        decoder.final_layer_norm            FINAL_NORM
        """,
        prefixes=("model.", ""),
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """A token table narrower than hidden_size: projected in before the positions join,
        and out (the tied LM head's d -> E) after the last norm."""
        width = get(config, "word_embed_proj_dim", spec["d_model"])
        if width == spec["d_model"]:
            return
        head = spec["head"]
        if head["kind"] == "none":
            head["project"] = width
        elif head["kind"] != "lm" or not head.get("tie", True):
            raise ConversionError(
                f"config.json word_embed_proj_dim={width} != hidden_size={spec['d_model']} is "
                "supported with the tied causal-LM head (OPTForCausalLM) and the base model "
                "(OPTModel) only; HF's task heads read project_out's narrower states"
            )
        spec["embedding"] = {
            "kind": "factorized",
            "embedding_size": width,
            "project_bias": False,
            "positions": "after",
            "dropout": 0.0,
        }
