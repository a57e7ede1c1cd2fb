"""CLIP's text tower (clip_text_model): a causal pre-LN stack with learned positions by index,
biased q/k/v/o, a QuickGELU MLP and a final norm, its sentence vector the state at the
end-of-text token (CLIPTextModel's pooler_output), projected bias-free in
CLIPTextModelWithProjection (text_embeds)."""

from __future__ import annotations

from typing import Any

from archzoo.parts.converter import ConversionError, Converter, Field, parse_fields, spec_parts

from .common import ACTIVATION, PAD, SIZES, table, task

LEGACY_EOS = 2  # transformers pools such checkpoints at the row's highest id (end-of-text)


class ClipTextConverter(
    Converter, model_type="clip_text_model", hf_prefix="CLIPText", family="decoder"
):
    fixed = spec_parts(
        "embedding: {kind: token, dropout: 0.0}, position: learned, block: pre_ln",
        "attention: {kind: mha, fused_qkv: false, bias: true}, ffn: {kind: mlp, bias: true}",
        "dropout: 0.0, norm: layernorm",
    )
    fields = (
        *SIZES,
        *parse_fields(
            """
            max_position_embeddings     max_len             77
            attention_dropout           attention_dropout   0.0
            layer_norm_eps              norm.eps            1e-5
            hidden_act                  ffn.activation      quick_gelu  ACTIVATION
            """,
            ACTIVATION=ACTIVATION,
        ),
        *PAD,
    )
    tasks = {
        "Model": task("kind: sentence_embedding, projection: null"),
        "ModelWithProjection": task(
            "kind: sentence_embedding",
            "text_projection  SENTENCE_PROJECTION",
            fields=(Field("projection_dim", "head.projection", 512),),
        ),
    }
    default_task = "ModelWithProjection"
    tensors = table(
        """
        embeddings.token_embedding                  WORD
        embeddings.position_embedding               POSITION
        encoder.layers.{i}.self_attn.(q_proj,k_proj,v_proj,out_proj)  Q,K,V,ATTN_OUT
        encoder.layers.{i}.(layer_norm1,layer_norm2)    ATTN_NORM,FFN_NORM
        encoder.layers.{i}.mlp.(fc1,fc2)            FC_IN,FC_OUT
        final_layer_norm                            FINAL_NORM
        """,
        prefixes=("text_model.", ""),
        ignore=("embeddings.position_ids",),
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """The pooled token: the first eos_token_id of each row, or (eos_token_id 2, the
        checkpoints before transformers' PR #24773) the row's highest id."""
        eos = config.get("eos_token_id", 49407)  # CLIPTextConfig's default
        if eos == LEGACY_EOS:
            spec["head"].update(pooling="max_id", eos_token_id=None)
        elif type(eos) is int and 0 <= eos < spec["vocab_size"]:
            spec["head"].update(pooling="first_eos", eos_token_id=eos)
        else:
            raise ConversionError(
                f"config.json eos_token_id={eos!r}: CLIP's text tower pools at one end-of-text "
                f"id within the vocabulary (0..{spec['vocab_size'] - 1})"
            )

    def adjust_config(self, config: dict[str, Any], spec: Any) -> None:
        head = spec.get("head") or {}
        pooled = {"max_id": LEGACY_EOS, "first_eos": head.get("eos_token_id")}
        config["eos_token_id"] = pooled.get(head.get("pooling"), config.get("eos_token_id"))
