"""BERT (and RoBERTa, which differs in names and position offset): post-LN encoder, MLM head."""

from __future__ import annotations

from typing import Any

from torch import Tensor

from archzoo.converter import Converter, TensorSource, get

from .common import activation, fuse, linear, name_of, norm, prefix, refuse, special_tokens


class BertConverter(Converter):
    model_type = "bert"
    base = "bert."
    head_prefix = "cls.predictions."

    def position_offset(self, config: dict[str, Any]) -> int:
        return 0

    def to_spec(self, config: dict[str, Any]) -> dict[str, Any]:
        refuse(config, "position_embedding_type", "absolute")
        refuse(config, "is_decoder", False)
        offset = self.position_offset(config)
        act = activation(get(config, "hidden_act", "gelu"))
        return {
            "name": name_of(config),
            **special_tokens(config),
            "family": "encoder",
            "vocab_size": get(config, "vocab_size"),
            "d_model": get(config, "hidden_size"),
            "n_layers": get(config, "num_hidden_layers"),
            "n_heads": get(config, "num_attention_heads"),
            "d_ff": get(config, "intermediate_size"),
            "max_len": get(config, "max_position_embeddings") - offset,
            "dropout": get(config, "hidden_dropout_prob", 0.1),
            "attention_dropout": get(config, "attention_probs_dropout_prob", 0.1),
            "pad_token_id": config.get("pad_token_id"),
            "embedding": {
                "kind": "token",
                "type_vocab_size": get(config, "type_vocab_size", 2),
                "norm": True,
            },
            "position": {"kind": "learned", "offset": offset},
            "attention": {"kind": "mha", "fused_qkv": True, "bias": True},
            "block": "post_ln",
            "norm": {"kind": "layernorm", "eps": get(config, "layer_norm_eps", 1e-12)},
            "ffn": {"kind": "mlp", "activation": act},
            "head": {
                "kind": "mlm",
                "activation": act,
                "tie": get(config, "tie_word_embeddings", True),
            },
        }

    def convert(self, src: TensorSource, config: dict[str, Any]) -> dict[str, Tensor]:
        p = prefix(src, "embeddings.word_embeddings.weight", self.base, "")
        e = p + "embeddings."
        out: dict[str, Any] = {
            "encoder.embedding.word.weight": src.take(e + "word_embeddings.weight"),
            "encoder.position.table.weight": src.take(e + "position_embeddings.weight"),
            "encoder.embedding.token_type.weight": src.take(e + "token_type_embeddings.weight"),
        }
        norm(out, src, e + "LayerNorm", "encoder.embedding.norm")
        src.skip(e + "position_ids")  # buffers saved by old versions
        src.skip(e + "token_type_ids")
        for i in range(config["num_hidden_layers"]):
            hf, ours = f"{p}encoder.layer.{i}.", f"encoder.blocks.{i}."
            parts = [f"{hf}attention.self.{h}" for h in ("query", "key", "value")]
            for kind in ("weight", "bias"):  # one fused q|k|v projection: one GEMM, not three
                out[f"{ours}attention.qkv.{kind}"] = fuse([src.take(f"{n}.{kind}") for n in parts])
            linear(out, src, hf + "attention.output.dense", ours + "attention.out")
            norm(out, src, hf + "attention.output.LayerNorm", ours + "attention_norm")
            linear(out, src, hf + "intermediate.dense", ours + "ffn.fc_in")
            linear(out, src, hf + "output.dense", ours + "ffn.fc_out")
            norm(out, src, hf + "output.LayerNorm", ours + "ffn_norm")
        self.convert_head(out, src, config)
        for unused in ("pooler.dense.weight", "pooler.dense.bias"):  # not part of an MLM model
            src.skip(p + unused)
        src.skip("cls.seq_relationship.weight")
        src.skip("cls.seq_relationship.bias")
        return out

    def convert_head(self, out: dict[str, Any], src: TensorSource, config: dict[str, Any]) -> None:
        h = self.head_prefix
        linear(out, src, h + "transform.dense", "head.dense")
        norm(out, src, h + "transform.LayerNorm", "head.norm")
        self.decoder_weight(out, src, config, h + "decoder", h + "bias")

    def decoder_weight(
        self, out: dict[str, Any], src: TensorSource, config: dict[str, Any], name: str, bias: str
    ) -> None:
        if get(config, "tie_word_embeddings", True):
            src.skip(name + ".weight")
        else:
            out["head.decoder.weight"] = src.take(name + ".weight")
        # The decoder's bias is what forward adds; it is the head bias itself when tied, and
        # its own tensor (the head bias then unused) in untied transformers-5 checkpoints.
        out["head.bias"] = src.take(name + ".bias", bias)
        src.skip(bias)


class RobertaConverter(BertConverter):
    model_type = "roberta"
    base = "roberta."

    def position_offset(self, config: dict[str, Any]) -> int:
        return get(config, "pad_token_id", 1) + 1  # positions start after padding_idx

    def convert_head(self, out: dict[str, Any], src: TensorSource, config: dict[str, Any]) -> None:
        linear(out, src, "lm_head.dense", "head.dense")
        norm(out, src, "lm_head.layer_norm", "head.norm")
        self.decoder_weight(out, src, config, "lm_head.decoder", "lm_head.bias")
