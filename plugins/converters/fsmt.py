"""FSMT (fairseq's WMT19 translation models): post-LN encoder-decoder with a source and a
target vocabulary (src_vocab_size, tgt_vocab_size: `decoder.vocab_size`), each stack its own
token table and the decoder its own output projection unless tie_word_embeddings ties all
three; sqrt(d)-scaled embeddings; fairseq's sinusoidal positions (tensor2tensor frequencies,
sines then cosines) counted from padding_idx + 1, saved as frozen tables whose padding row is
zero. transformers' FSMTModel ends in the output projection too (its last_hidden_state is
the logits), so both of its classes import as an `lm` head."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from archzoo.parts.converter import get, parse_fields
from archzoo.plugins.position.sinusoidal import sinusoidal_table

from .bart import BART_FIELDS, BART_STACKS, BART_TENSORS, bart_parts
from .common import table, task, with_defaults
from .marian import SavedSinusoidsConverter

FSMT_FIELDS = (
    *with_defaults(
        [f for f in BART_FIELDS if f.hf != "vocab_size"],
        scale_embedding=True,
        activation_function="relu",
    ),
    *parse_fields(
        """
        src_vocab_size          vocab_size
        tgt_vocab_size          decoder.vocab_size
        tie_word_embeddings     head.tie,tie_embeddings     False   # all three tables, or none
        """
    ),
)
# tied, transformers saves the decoder's table alone: the encoder reads it then
FSMT_TENSORS = BART_TENSORS.replace(
    "shared|{s}.embed_tokens", "{s}.embed_tokens|decoder.embed_tokens"
)
LM = task("kind: lm")  # the projection sits in the base model (decoder.output_projection)


class FSMTConverter(
    SavedSinusoidsConverter, model_type="fsmt", hf_prefix="FSMT", family="encoder-decoder"
):
    fixed = bart_parts(
        "post_ln",
        "token",
        "{kind: sinusoidal, layout: halves, frequencies: tensor2tensor, count: tokens}",
    )
    fields = FSMT_FIELDS
    tasks = {"ForConditionalGeneration": LM, "Model": LM}
    tensors = table(
        FSMT_TENSORS + "decoder.output_projection  LM_PROJ",
        prefixes=("model.", ""),
        stacks=BART_STACKS,
        ignore=("{s}.embed_positions.weight",),  # checked against the table, then computed
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Real tokens sit at positions padding_idx + 1, + 2, ... (fairseq's make_positions)."""
        spec["position"]["offset"] = get(config, "pad_token_id", 1) + 1

    def saved_table(self, rows: int, width: int, pad: int | None) -> Tensor:
        """fairseq's table: tensor2tensor frequencies, sines then cosines, row `pad` zero."""
        out = sinusoidal_table(
            torch.arange(rows), width, frequencies="tensor2tensor", layout="halves"
        )
        if pad is not None:
            out[pad] = 0.0
        return out

    def saved_rows(self, spec: Mapping[str, Any]) -> int:
        """max_position_embeddings + padding_idx + 1 rows, as transformers builds them."""
        return int(spec["max_len"]) + int(spec.get("pad_token_id") or 0) + 1
