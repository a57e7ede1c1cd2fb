"""GPT-NeoX (Pythia): parallel residual, partial rotary, per-head fused QKV, untied head."""

from __future__ import annotations

from typing import Any

from torch import Tensor

from archzoo.converter import Converter, TensorSource, get

from .common import (
    activation,
    heads_qkv_to_blocks,
    linear,
    name_of,
    norm,
    rope_parameters,
    special_tokens,
)


class GPTNeoXConverter(Converter):
    model_type = "gpt_neox"

    def to_spec(self, config: dict[str, Any]) -> dict[str, Any]:
        bias = get(config, "attention_bias", True)
        parallel = get(config, "use_parallel_residual", True)
        return {
            "name": name_of(config),
            **special_tokens(config),
            "family": "decoder",
            "vocab_size": get(config, "vocab_size"),
            "d_model": get(config, "hidden_size"),
            "n_layers": get(config, "num_hidden_layers"),
            "n_heads": get(config, "num_attention_heads"),
            "d_ff": get(config, "intermediate_size"),
            "max_len": get(config, "max_position_embeddings", 2048),
            "dropout": get(config, "hidden_dropout", 0.0),
            "attention_dropout": get(config, "attention_dropout", 0.0),
            "pad_token_id": config.get("pad_token_id"),
            "embedding": "token",
            "position": {"kind": "rotary", **rope_parameters(config)},
            "attention": {"kind": "mha", "fused_qkv": True, "bias": bias, "out_bias": bias},
            "block": "parallel" if parallel else "pre_ln",
            "norm": {"kind": "layernorm", "eps": get(config, "layer_norm_eps", 1e-5)},
            "ffn": {"kind": "mlp", "activation": activation(get(config, "hidden_act", "gelu"))},
            "head": {"kind": "lm", "tie": get(config, "tie_word_embeddings", False)},
        }

    def convert(self, src: TensorSource, config: dict[str, Any]) -> dict[str, Tensor]:
        heads = config["num_attention_heads"]
        bias = get(config, "attention_bias", True)
        out: dict[str, Any] = {
            "decoder.embedding.word.weight": src.take("gpt_neox.embed_in.weight")
        }
        for i in range(config["num_hidden_layers"]):
            hf, ours = f"gpt_neox.layers.{i}.", f"decoder.blocks.{i}."
            qkv = hf + "attention.query_key_value"
            out[ours + "attention.qkv.weight"] = heads_qkv_to_blocks(
                src.take(qkv + ".weight"), heads
            )
            if bias:
                out[ours + "attention.qkv.bias"] = heads_qkv_to_blocks(
                    src.take(qkv + ".bias"), heads
                )
            linear(out, src, hf + "attention.dense", ours + "attention.out", bias=bias)
            linear(out, src, hf + "mlp.dense_h_to_4h", ours + "ffn.fc_in")
            linear(out, src, hf + "mlp.dense_4h_to_h", ours + "ffn.fc_out")
            norm(out, src, hf + "input_layernorm", ours + "attention_norm")
            norm(out, src, hf + "post_attention_layernorm", ours + "ffn_norm")
            for buffer in (
                "attention.bias",
                "attention.masked_bias",
                "attention.rotary_emb.inv_freq",
            ):
                src.skip(hf + buffer)
        norm(out, src, "gpt_neox.final_layer_norm", "decoder.final_norm")
        if get(config, "tie_word_embeddings", False):
            src.skip("embed_out.weight")
        else:
            out["head.proj.weight"] = src.take("embed_out.weight")
        return out
