"""GPT-NeoX Japanese (ABEJA): GPT-NeoX's per-head fused QKV and partial rotary in sequential
pre-LN blocks, no biases but one: the last layer's attention output (`dense_bias`, added
after the output projection), an FFN intermediate_multiple_size x hidden_size wide, a head
tied by default."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import Tensor

from archzoo.parts.converter import Field, TensorSource, parse_fields, spec_parts

from .common import ACTIVATION, HEADLESS, SIZES, lm_task, megatron_layer, table
from .gpt_neox import GPTNeoXConverter

LAST_BIAS = ("attention.dense_bias", "attention.dense.bias")  # HF's name, the table's


class GPTNeoXJapaneseConverter(
    GPTNeoXConverter, model_type="gpt_neox_japanese", hf_prefix="GPTNeoXJapanese"
):
    fixed = spec_parts(
        "embedding: token, norm: layernorm, block: pre_ln, ffn: {kind: mlp, bias: false}",
        "attention: {kind: mha, fused_qkv: true, bias: false, out_bias: false}",
    )
    fields = (
        *(f for f in SIZES if f.hf != "intermediate_size"),
        Field("intermediate_multiple_size", "d_ff", 4),  # times d_model, in adjust
        *parse_fields(
            """
            max_position_embeddings     max_len             2048
            hidden_dropout              dropout             0.0
            attention_dropout           attention_dropout   0.1
            layer_norm_eps              norm.eps            1e-5
            hidden_act                  ffn.activation      gelu    ACTIVATION
            pad_token_id                pad_token_id        None
            """,
            ACTIVATION=ACTIVATION,
        ),
    )
    tasks = {
        "Model": HEADLESS,
        "ForCausalLM": lm_task(True, "embed_out  LM_PROJ"),
    }
    tensors = table(
        "embed_in  WORD\nfinal_layer_norm  FINAL_NORM\n"
        + megatron_layer("layers.{i}", "attention"),
        prefixes=("gpt_neox_japanese.", ""),
        ignore=("layers.{i}.attention.rotary_emb.inv_freq",),
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Rotary; the FFN width as a multiple; the last layer's output bias."""
        super().adjust(spec, config)
        spec["d_ff"] = int(spec["d_model"] * spec["d_ff"])
        spec["layers"] = [{"select": [spec["n_layers"] - 1], "attention": {"out_bias": True}}]

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        super().adjust_config(config, spec)
        if spec["d_ff"] % spec["d_model"] == 0:  # else export's round trip names d_ff
            config["intermediate_multiple_size"] = spec["d_ff"] // spec["d_model"]

    def import_state(
        self, src: TensorSource, config: dict[str, Any], names: Any, ctx: dict[str, Any]
    ) -> dict[str, Tensor]:
        """The last layer's `dense_bias` read as its output projection's bias."""
        for name in list(src.names()):
            if name.endswith(LAST_BIAS[0]):
                src.add(name.removesuffix(LAST_BIAS[0]) + LAST_BIAS[1], src.take(name))
        return super().import_state(src, config, names, ctx)

    def export_state(self, state: Any, names: Any, ctx: Any, prefix: Any = None, task: Any = None):
        """The table's tensors, the output bias under transformers' name `dense_bias`."""
        out = super().export_state(state, names, ctx, prefix, task)
        for name in [n for n in out if n.endswith(LAST_BIAS[1])]:
            out[name.removesuffix(LAST_BIAS[1]) + LAST_BIAS[0]] = out.pop(name)
        return out
