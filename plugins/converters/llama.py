"""Llama (and Mistral, which adds a sliding window): RMSNorm, rotary, GQA, SwiGLU, untied head."""

from __future__ import annotations

from typing import Any

from torch import Tensor

from archzoo.converter import Converter, TensorSource, get

from .common import linear, name_of, norm, refuse, rope_parameters, special_tokens


class LlamaConverter(Converter):
    model_type = "llama"

    def to_spec(self, config: dict[str, Any]) -> dict[str, Any]:
        refuse(config, "hidden_act", "silu")
        refuse(config, "pretraining_tp", 1)
        d, heads = get(config, "hidden_size"), get(config, "num_attention_heads")
        bias = get(config, "attention_bias", False)
        return {
            "name": name_of(config),
            **special_tokens(config),
            "family": "decoder",
            "vocab_size": get(config, "vocab_size"),
            "d_model": d,
            "n_layers": get(config, "num_hidden_layers"),
            "n_heads": heads,
            "head_dim": get(config, "head_dim", d // heads),
            "d_ff": get(config, "intermediate_size"),
            "max_len": get(config, "max_position_embeddings", 2048),
            "dropout": 0.0,
            "attention_dropout": get(config, "attention_dropout", 0.0),
            "pad_token_id": config.get("pad_token_id"),
            "embedding": "token",
            "position": {"kind": "rotary", **rope_parameters(config)},
            "attention": {
                "kind": "mha",
                "n_kv_heads": get(config, "num_key_value_heads", heads),
                "fused_qkv": False,
                "bias": bias,
                "out_bias": bias,
            },
            "block": "pre_ln",
            "norm": {"kind": "rmsnorm", "eps": get(config, "rms_norm_eps", 1e-6)},
            "ffn": {"kind": "glu", "activation": "swiglu", "bias": get(config, "mlp_bias", False)},
            "head": {"kind": "lm", "tie": get(config, "tie_word_embeddings", False)},
        }

    def convert(self, src: TensorSource, config: dict[str, Any]) -> dict[str, Tensor]:
        out: dict[str, Any] = {
            "decoder.embedding.word.weight": src.take("model.embed_tokens.weight")
        }
        bias = get(config, "attention_bias", False)
        mlp_bias = get(config, "mlp_bias", False)
        for i in range(config["num_hidden_layers"]):
            hf, ours = f"model.layers.{i}.", f"decoder.blocks.{i}."
            for h, o in (("q_proj", "q"), ("k_proj", "k"), ("v_proj", "v"), ("o_proj", "out")):
                linear(out, src, f"{hf}self_attn.{h}", f"{ours}attention.{o}", bias=bias)
            for h, o in (("gate_proj", "gate"), ("up_proj", "up"), ("down_proj", "down")):
                linear(out, src, f"{hf}mlp.{h}", f"{ours}ffn.{o}", bias=mlp_bias)
            norm(out, src, hf + "input_layernorm", ours + "attention_norm", bias=False)
            norm(out, src, hf + "post_attention_layernorm", ours + "ffn_norm", bias=False)
            src.skip(hf + "self_attn.rotary_emb.inv_freq")
        norm(out, src, "model.norm", "decoder.final_norm", bias=False)
        if get(config, "tie_word_embeddings", False):
            src.skip("lm_head.weight")
        else:
            out["head.proj.weight"] = src.take("lm_head.weight")
        return out
