"""ALBERT: BERT's post-LN encoder with a factorized embedding and layers shared across groups."""

from __future__ import annotations

from typing import Any

from torch import Tensor

from archzoo.converter import ConversionError, Converter, TensorSource, get

from .common import activation, linear, name_of, norm, prefix, refuse, special_tokens


class AlbertConverter(Converter):
    model_type = "albert"

    def to_spec(self, config: dict[str, Any]) -> dict[str, Any]:
        refuse(config, "inner_group_num", 1)
        refuse(config, "position_embedding_type", "absolute")
        act = activation(get(config, "hidden_act", "gelu_new"))
        return {
            "name": name_of(config),
            **special_tokens(config),
            "family": "encoder",
            "vocab_size": get(config, "vocab_size"),
            "d_model": get(config, "hidden_size"),
            "n_layers": get(config, "num_hidden_layers"),
            "n_heads": get(config, "num_attention_heads"),
            "d_ff": get(config, "intermediate_size"),
            "max_len": get(config, "max_position_embeddings"),
            "dropout": get(config, "hidden_dropout_prob", 0.0),
            "attention_dropout": get(config, "attention_probs_dropout_prob", 0.0),
            "pad_token_id": config.get("pad_token_id"),
            "embedding": {
                "kind": "factorized",
                "embedding_size": get(config, "embedding_size"),
                "type_vocab_size": get(config, "type_vocab_size", 2),
                "norm": True,
            },
            "position": "learned",
            "attention": {"kind": "mha", "fused_qkv": False, "bias": True},
            "block": "post_ln",
            "norm": {"kind": "layernorm", "eps": get(config, "layer_norm_eps", 1e-12)},
            "ffn": {"kind": "mlp", "activation": act},
            "sharing": self.sharing(config),
            "head": {
                "kind": "mlm",
                "activation": act,
                "tie": get(config, "tie_word_embeddings", True),
            },
        }

    def sharing(self, config: dict[str, Any]) -> dict[str, Any]:
        """HF's num_hidden_groups as a sharing component ('all' for ALBERT's usual 1)."""
        n_layers, n_groups = get(config, "num_hidden_layers"), get(config, "num_hidden_groups", 1)
        if n_groups == 1:
            return {"kind": "all"}
        if n_layers % n_groups:
            raise ConversionError(
                f"config.json num_hidden_groups={n_groups} does not divide "
                f"num_hidden_layers={n_layers}; only equal-sized groups are supported"
            )
        return {"kind": "groups", "n_groups": n_groups}

    def convert(self, src: TensorSource, config: dict[str, Any]) -> dict[str, Tensor]:
        p = prefix(src, "embeddings.word_embeddings.weight", "albert.", "")
        e = p + "embeddings."
        out: dict[str, Any] = {
            "encoder.embedding.word.weight": src.take(e + "word_embeddings.weight"),
            "encoder.position.table.weight": src.take(e + "position_embeddings.weight"),
            "encoder.embedding.token_type.weight": src.take(e + "token_type_embeddings.weight"),
        }
        norm(out, src, e + "LayerNorm", "encoder.embedding.norm")
        src.skip(e + "position_ids")  # buffers saved by old versions
        src.skip(e + "token_type_ids")
        linear(out, src, p + "encoder.embedding_hidden_mapping_in", "encoder.embedding.project")
        for g in range(get(config, "num_hidden_groups", 1)):
            hf, ours = (
                f"{p}encoder.albert_layer_groups.{g}.albert_layers.0.",
                f"encoder.blocks.{g}.",
            )
            for h, o in (("query", "q"), ("key", "k"), ("value", "v"), ("dense", "out")):
                linear(out, src, f"{hf}attention.{h}", f"{ours}attention.{o}")
            norm(out, src, hf + "attention.LayerNorm", ours + "attention_norm")
            linear(out, src, hf + "ffn", ours + "ffn.fc_in")
            linear(out, src, hf + "ffn_output", ours + "ffn.fc_out")
            norm(out, src, hf + "full_layer_layer_norm", ours + "ffn_norm")
        linear(out, src, "predictions.dense", "head.dense")
        norm(out, src, "predictions.LayerNorm", "head.norm")
        if get(config, "tie_word_embeddings", True):
            out["head.bias"] = src.take("predictions.bias")
            src.skip("predictions.decoder.weight")  # tied copies, when saved
            src.skip("predictions.decoder.bias")
        else:  # transformers 5 unties the bias too: the decoder's is the one forward adds
            out["head.decoder.weight"] = src.take("predictions.decoder.weight")
            out["head.bias"] = src.take("predictions.decoder.bias", "predictions.bias")
            src.skip("predictions.bias")
        for unused in ("pooler.weight", "pooler.bias"):  # not part of an MLM model
            src.skip(p + unused)
        src.skip("sop_classifier.classifier.weight")  # AlbertForPreTraining's order head
        src.skip("sop_classifier.classifier.bias")
        return out
