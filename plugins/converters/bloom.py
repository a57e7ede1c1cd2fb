"""BLOOM: ALiBi, embedding LayerNorm, per-head fused QKV, tied head."""

from __future__ import annotations

from typing import Any

from torch import Tensor

from archzoo.converter import Converter, TensorSource, get

from .common import heads_qkv_to_blocks, linear, name_of, norm, prefix, refuse, special_tokens


class BloomConverter(Converter):
    model_type = "bloom"

    def to_spec(self, config: dict[str, Any]) -> dict[str, Any]:
        refuse(config, "apply_residual_connection_post_layernorm", False)
        d = get(config, "hidden_size", None) or get(config, "n_embed")
        return {
            "name": name_of(config),
            **special_tokens(config),
            "family": "decoder",
            "vocab_size": get(config, "vocab_size"),
            "d_model": d,
            "n_layers": get(config, "n_layer"),
            "n_heads": get(config, "n_head"),
            "d_ff": 4 * d,
            "max_len": get(config, "seq_length", 2048),
            "dropout": get(config, "hidden_dropout", 0.0),
            "attention_dropout": get(config, "attention_dropout", 0.0),
            "pad_token_id": config.get("pad_token_id"),
            "embedding": {"kind": "token", "norm": True},
            "position": "alibi",
            "attention": {"kind": "mha", "fused_qkv": True, "bias": True},
            "block": "pre_ln",
            "norm": {"kind": "layernorm", "eps": get(config, "layer_norm_epsilon", 1e-5)},
            "ffn": {"kind": "mlp", "activation": "gelu_tanh"},
            "head": {"kind": "lm", "tie": get(config, "tie_word_embeddings", True)},
        }

    def convert(self, src: TensorSource, config: dict[str, Any]) -> dict[str, Tensor]:
        heads = config["n_head"]
        p = prefix(src, "word_embeddings.weight", "transformer.", "")
        out: dict[str, Any] = {
            "decoder.embedding.word.weight": src.take(p + "word_embeddings.weight")
        }
        norm(out, src, p + "word_embeddings_layernorm", "decoder.embedding.norm")
        for i in range(config["n_layer"]):
            hf, ours = f"{p}h.{i}.", f"decoder.blocks.{i}."
            qkv = hf + "self_attention.query_key_value"
            out[ours + "attention.qkv.weight"] = heads_qkv_to_blocks(
                src.take(qkv + ".weight"), heads
            )
            out[ours + "attention.qkv.bias"] = heads_qkv_to_blocks(src.take(qkv + ".bias"), heads)
            linear(out, src, hf + "self_attention.dense", ours + "attention.out")
            linear(out, src, hf + "mlp.dense_h_to_4h", ours + "ffn.fc_in")
            linear(out, src, hf + "mlp.dense_4h_to_h", ours + "ffn.fc_out")
            norm(out, src, hf + "input_layernorm", ours + "attention_norm")
            norm(out, src, hf + "post_attention_layernorm", ours + "ffn_norm")
        norm(out, src, p + "ln_f", "decoder.final_norm")
        if get(config, "tie_word_embeddings", True):
            src.skip("lm_head.weight")
        else:
            out["head.proj.weight"] = src.take("lm_head.weight")
        return out
