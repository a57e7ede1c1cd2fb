"""GPT-Neo: GPT-2's layout with unscaled scores, separate q/k/v (no bias), and layers that
alternate global (dense causal) and local (sliding window of `window_size` keys) attention."""

from __future__ import annotations

from typing import Any

from torch import Tensor

from archzoo.converter import ConversionError, Converter, TensorSource, get

from .common import activation, linear, name_of, norm

# q/k/v without bias, out_proj with bias, no 1/sqrt(head_dim) scaling of the scores
PROJECTIONS = {"fused_qkv": False, "bias": False, "out_bias": True, "scale": 1.0}


def attention_layers(config: dict[str, Any]) -> list[str]:
    """'global' / 'local' per layer, from `attention_layers` or expanded `attention_types`."""
    layers = config.get("attention_layers")
    if not layers:
        layers = []
        for kinds, repeat in get(config, "attention_types"):
            layers += list(kinds) * repeat
    n = get(config, "num_layers")
    if len(layers) != n or set(layers) - {"global", "local"}:
        raise ConversionError(
            f"config.json attention_layers must name 'global' or 'local' for each of {n} "
            f"layers, got {layers!r}"
        )
    return layers


class GPTNeoConverter(Converter):
    model_type = "gpt_neo"

    def to_spec(self, config: dict[str, Any]) -> dict[str, Any]:
        d = get(config, "hidden_size")
        kinds = attention_layers(config)
        local = {"kind": "local", "window": get(config, "window_size", 256), **PROJECTIONS}
        local_layers = [i for i, kind in enumerate(kinds) if kind == "local"]
        spec = {
            "name": name_of(config),
            "family": "decoder",
            "vocab_size": get(config, "vocab_size"),
            "d_model": d,
            "n_layers": get(config, "num_layers"),
            "n_heads": get(config, "num_heads"),
            "d_ff": get(config, "intermediate_size", 4 * d),
            "max_len": get(config, "max_position_embeddings"),
            "dropout": get(config, "resid_dropout", 0.0),
            "attention_dropout": get(config, "attention_dropout", 0.0),
            "pad_token_id": config.get("pad_token_id"),
            "embedding": {"kind": "token", "dropout": get(config, "embed_dropout", 0.0)},
            "position": "learned",
            "attention": {"kind": "mha", **PROJECTIONS},
            "layers": [{"select": local_layers, "attention": local}] if local_layers else [],
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
        if len(local_layers) == len(kinds):
            spec["attention"], spec["layers"] = local, []
        return spec

    def convert(self, src: TensorSource, config: dict[str, Any]) -> dict[str, Tensor]:
        p = "transformer."
        out: dict[str, Any] = {
            "decoder.embedding.word.weight": src.take(p + "wte.weight"),
            "decoder.position.table.weight": src.take(p + "wpe.weight"),
        }
        for i in range(config["num_layers"]):
            hf, ours = f"{p}h.{i}.", f"decoder.blocks.{i}."
            norm(out, src, hf + "ln_1", ours + "attention_norm")
            norm(out, src, hf + "ln_2", ours + "ffn_norm")
            for h, o in (("q_proj", "q"), ("k_proj", "k"), ("v_proj", "v")):
                linear(out, src, f"{hf}attn.attention.{h}", f"{ours}attention.{o}", bias=False)
            linear(out, src, f"{hf}attn.attention.out_proj", f"{ours}attention.out")
            linear(out, src, f"{hf}mlp.c_fc", f"{ours}ffn.fc_in")
            linear(out, src, f"{hf}mlp.c_proj", f"{ours}ffn.fc_out")
            src.skip(hf + "attn.attention.bias")  # mask buffers of old checkpoints
            src.skip(hf + "attn.attention.masked_bias")
        norm(out, src, p + "ln_f", "decoder.final_norm")
        if get(config, "tie_word_embeddings", True):
            src.skip("lm_head.weight")
        else:
            out["head.proj.weight"] = src.take("lm_head.weight")
        return out
