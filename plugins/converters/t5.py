"""T5: RMSNorm pre-LN encoder-decoder, bucketed relative bias, unscaled scores, rescaled tied head."""

from __future__ import annotations

from typing import Any

from torch import Tensor

from archzoo.converter import ConversionError, Converter, TensorSource, get

from .common import linear, name_of, norm, special_tokens

FFN = {
    "relu": {"kind": "mlp", "activation": "relu", "bias": False},
    "gated-gelu": {"kind": "glu", "activation": "geglu_tanh", "bias": False},
    "gated-silu": {"kind": "glu", "activation": "swiglu", "bias": False},
}


class T5Converter(Converter):
    model_type = "t5"

    def to_spec(self, config: dict[str, Any]) -> dict[str, Any]:
        proj = get(config, "feed_forward_proj", "relu")
        if proj not in FFN:
            raise ConversionError(
                f"config.json feed_forward_proj={proj!r} is not supported; supported: {', '.join(FFN)}"
            )
        tie = get(config, "tie_word_embeddings", True)
        n_layers = get(config, "num_layers")
        return {
            "name": name_of(config),
            **special_tokens(config),
            "family": "encoder-decoder",
            "vocab_size": get(config, "vocab_size"),
            "d_model": get(config, "d_model"),
            "n_layers": n_layers,
            "n_heads": get(config, "num_heads"),
            "head_dim": get(config, "d_kv"),
            "d_ff": get(config, "d_ff"),
            "max_len": 512,
            "dropout": get(config, "dropout_rate", 0.1),
            "pad_token_id": get(config, "pad_token_id", 0),
            "tie_embeddings": True,
            "embedding": "token",
            "position": {
                "kind": "t5_relative",
                "n_buckets": get(config, "relative_attention_num_buckets", 32),
                "max_distance": get(config, "relative_attention_max_distance", 128),
            },
            "attention": {"kind": "mha", "fused_qkv": False, "bias": False, "scale": 1.0},
            "block": "pre_ln",
            "norm": {"kind": "rmsnorm", "eps": get(config, "layer_norm_epsilon", 1e-6)},
            "ffn": FFN[proj],
            "head": {
                "kind": "lm",
                "tie": tie,
                "rescale": bool(get(config, "scale_decoder_outputs", tie)),
            },
            "decoder": {"n_layers": get(config, "num_decoder_layers", n_layers)},
        }

    def convert(self, src: TensorSource, config: dict[str, Any]) -> dict[str, Tensor]:
        gated = get(config, "feed_forward_proj", "relu").startswith("gated")
        out: dict[str, Any] = {"encoder.embedding.word.weight": src.take("shared.weight")}
        src.skip("encoder.embed_tokens.weight")  # tied copies of shared.weight
        src.skip("decoder.embed_tokens.weight")
        layers = {
            "encoder": get(config, "num_layers"),
            "decoder": get(config, "num_decoder_layers", config["num_layers"]),
        }
        for stack, n in layers.items():
            out[f"{stack}.position.table.weight"] = src.take(
                f"{stack}.block.0.layer.0.SelfAttention.relative_attention_bias.weight"
            )
            for i in range(n):
                hf, ours = f"{stack}.block.{i}.layer.", f"{stack}.blocks.{i}."
                self._attention(out, src, hf + "0.SelfAttention", ours + "attention")
                norm(out, src, hf + "0.layer_norm", ours + "attention_norm", bias=False)
                ffn = 1
                if stack == "decoder":
                    self._attention(out, src, hf + "1.EncDecAttention", ours + "cross_attention")
                    norm(out, src, hf + "1.layer_norm", ours + "cross_norm", bias=False)
                    ffn = 2
                d = f"{hf}{ffn}.DenseReluDense."
                if gated:
                    linear(out, src, d + "wi_0", ours + "ffn.gate", bias=False)
                    linear(out, src, d + "wi_1", ours + "ffn.up", bias=False)
                    linear(out, src, d + "wo", ours + "ffn.down", bias=False)
                else:
                    linear(out, src, d + "wi", ours + "ffn.fc_in", bias=False)
                    linear(out, src, d + "wo", ours + "ffn.fc_out", bias=False)
                norm(out, src, f"{hf}{ffn}.layer_norm", ours + "ffn_norm", bias=False)
            norm(out, src, f"{stack}.final_layer_norm", f"{stack}.final_norm", bias=False)
        if get(config, "tie_word_embeddings", True):
            src.skip("lm_head.weight")
        else:
            out["head.proj.weight"] = src.take("lm_head.weight")
        return out

    @staticmethod
    def _attention(out: dict[str, Any], src: TensorSource, hf: str, ours: str) -> None:
        for h, o in (("q", "q"), ("k", "k"), ("v", "v"), ("o", "out")):
            linear(out, src, f"{hf}.{h}", f"{ours}.{o}", bias=False)
