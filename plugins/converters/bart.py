"""BART: post-LN encoder-decoder, learned positions offset by 2, embedding LayerNorm."""

from __future__ import annotations

from typing import Any

from torch import Tensor

from archzoo.converter import Converter, TensorSource, get

from .common import activation, linear, name_of, norm, refuse, special_tokens

POSITION_OFFSET = 2  # BART's learned positions start at index 2


class BartConverter(Converter):
    model_type = "bart"

    def to_spec(self, config: dict[str, Any]) -> dict[str, Any]:
        refuse(config, "normalize_before", False)
        refuse(config, "add_final_layer_norm", False)
        return {
            "name": name_of(config),
            **special_tokens(config),
            "family": "encoder-decoder",
            "vocab_size": get(config, "vocab_size"),
            "d_model": get(config, "d_model"),
            "n_layers": get(config, "encoder_layers"),
            "n_heads": get(config, "encoder_attention_heads"),
            "d_ff": get(config, "encoder_ffn_dim"),
            "max_len": get(config, "max_position_embeddings"),
            "dropout": get(config, "dropout", 0.1),
            "attention_dropout": get(config, "attention_dropout", 0.0),
            "pad_token_id": get(config, "pad_token_id", 1),
            "tie_embeddings": True,
            "embedding": {
                "kind": "token",
                "norm": True,
                "scale": bool(get(config, "scale_embedding", False)),
            },
            "position": {"kind": "learned", "offset": POSITION_OFFSET},
            "attention": {"kind": "mha", "fused_qkv": False, "bias": True},
            "block": "post_ln",
            "norm": {"kind": "layernorm", "eps": 1e-5},
            "ffn": {
                "kind": "mlp",
                "activation": activation(
                    get(config, "activation_function", "gelu"), "activation_function"
                ),
                "inner_dropout": get(config, "activation_dropout", 0.0),
            },
            "head": {
                "kind": "lm",
                "tie": get(config, "tie_word_embeddings", True),
                "fixed_bias": True,
            },
            "decoder": {
                "n_layers": get(config, "decoder_layers"),
                "n_heads": get(config, "decoder_attention_heads"),
                "d_ff": get(config, "decoder_ffn_dim"),
            },
        }

    def convert(self, src: TensorSource, config: dict[str, Any]) -> dict[str, Tensor]:
        out: dict[str, Any] = {"encoder.embedding.word.weight": src.take("model.shared.weight")}
        src.skip("model.encoder.embed_tokens.weight")  # tied copies of model.shared.weight
        src.skip("model.decoder.embed_tokens.weight")
        for stack, n in (
            ("encoder", config["encoder_layers"]),
            ("decoder", config["decoder_layers"]),
        ):
            m = f"model.{stack}."
            out[f"{stack}.position.table.weight"] = src.take(m + "embed_positions.weight")
            norm(out, src, m + "layernorm_embedding", f"{stack}.embedding.norm")
            for i in range(n):
                hf, ours = f"{m}layers.{i}.", f"{stack}.blocks.{i}."
                self._attention(out, src, hf + "self_attn", ours + "attention")
                norm(out, src, hf + "self_attn_layer_norm", ours + "attention_norm")
                if stack == "decoder":
                    self._attention(out, src, hf + "encoder_attn", ours + "cross_attention")
                    norm(out, src, hf + "encoder_attn_layer_norm", ours + "cross_norm")
                linear(out, src, hf + "fc1", ours + "ffn.fc_in")
                linear(out, src, hf + "fc2", ours + "ffn.fc_out")
                norm(out, src, hf + "final_layer_norm", ours + "ffn_norm")
        bias = src.take("final_logits_bias")
        out["head.fixed_bias"] = None if bias is None else bias.reshape(-1)  # (1, V) -> (V,)
        if get(config, "tie_word_embeddings", True):
            src.skip("lm_head.weight")
        else:
            out["head.proj.weight"] = src.take("lm_head.weight")
        return out

    @staticmethod
    def _attention(out: dict[str, Any], src: TensorSource, hf: str, ours: str) -> None:
        for h, o in (("q_proj", "q"), ("k_proj", "k"), ("v_proj", "v"), ("out_proj", "out")):
            linear(out, src, f"{hf}.{h}", f"{ours}.{o}")
