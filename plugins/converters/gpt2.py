"""GPT-2: pre-LN decoder, learned positions, Conv1D (transposed) projections."""

from __future__ import annotations

from typing import Any

from torch import Tensor

from archzoo.converter import Converter, TensorSource, get

from .common import activation, name_of, norm, prefix, refuse, special_tokens


class GPT2Converter(Converter):
    model_type = "gpt2"

    def to_spec(self, config: dict[str, Any]) -> dict[str, Any]:
        refuse(config, "scale_attn_by_inverse_layer_idx", False)
        d = get(config, "n_embd")
        return {
            "name": name_of(config),
            **special_tokens(config),
            "family": "decoder",
            "vocab_size": get(config, "vocab_size"),
            "d_model": d,
            "n_layers": get(config, "n_layer"),
            "n_heads": get(config, "n_head"),
            "d_ff": get(config, "n_inner", 4 * d),
            "max_len": get(config, "n_positions"),
            "dropout": get(config, "resid_pdrop", 0.1),
            "attention_dropout": get(config, "attn_pdrop", 0.1),
            "pad_token_id": config.get("pad_token_id"),
            "embedding": {"kind": "token", "dropout": get(config, "embd_pdrop", 0.1)},
            "position": "learned",
            "attention": {
                "kind": "mha",
                "fused_qkv": True,
                "bias": True,
                "scale": None if get(config, "scale_attn_weights", True) else 1.0,
            },
            "block": "pre_ln",
            "norm": {"kind": "layernorm", "eps": get(config, "layer_norm_epsilon", 1e-5)},
            "ffn": {
                "kind": "mlp",
                "activation": activation(
                    get(config, "activation_function", "gelu_new"), "activation_function"
                ),
            },
            "head": {"kind": "lm", "tie": get(config, "tie_word_embeddings", True)},
        }

    def convert(self, src: TensorSource, config: dict[str, Any]) -> dict[str, Tensor]:
        p = prefix(src, "wte.weight", "transformer.", "")
        out: dict[str, Any] = {
            "decoder.embedding.word.weight": src.take(p + "wte.weight"),
            "decoder.position.table.weight": src.take(p + "wpe.weight"),
        }
        for i in range(config["n_layer"]):
            hf, ours = f"{p}h.{i}.", f"decoder.blocks.{i}."
            norm(out, src, hf + "ln_1", ours + "attention_norm")
            norm(out, src, hf + "ln_2", ours + "ffn_norm")
            for h, o in (
                ("attn.c_attn", "attention.qkv"),
                ("attn.c_proj", "attention.out"),
                ("mlp.c_fc", "ffn.fc_in"),
                ("mlp.c_proj", "ffn.fc_out"),
            ):
                w = src.take(f"{hf}{h}.weight")  # Conv1D stores (in, out)
                out[f"{ours}{o}.weight"] = None if w is None else w.t()  # a view: no copy
                out[f"{ours}{o}.bias"] = src.take(f"{hf}{h}.bias")
            src.skip(hf + "attn.bias")  # causal-mask buffers of old checkpoints
            src.skip(hf + "attn.masked_bias")
        norm(out, src, p + "ln_f", "decoder.final_norm")
        if get(config, "tie_word_embeddings", True):
            src.skip("lm_head.weight")
        else:
            out["head.proj.weight"] = src.take("lm_head.weight")
        return out
