"""Marian: BART's post-LN layout with Vaswani et al.'s sinusoidal positions (sines, then
cosines) and no embedding norm; one vocabulary shared by both stacks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from archzoo.parts.converter import ConversionError, Converter, TensorSource, get
from archzoo.plugins.position.sinusoidal import sinusoidal_table

from .bart import BART_FIELDS, BART_STACKS, BART_TENSORS, LM_FIXED_BIAS, bart_parts
from .common import DECODER_LM, HEADLESS, table


class SavedSinusoidsConverter(Converter):
    """A type that saves its sinusoidal table as a frozen weight (Marian, Pegasus): archzoo
    computes the table, after checking the saved one is that table (a trained one is not).
    `saved_sinusoids`: the stacks that save one; `sinusoid_width`: its columns; `saved_table`
    its values and `saved_rows` how many rows export writes."""

    saved_sinusoids: tuple[str, ...] = ("encoder", "decoder")

    def sinusoid_width(self, spec: Mapping[str, Any]) -> int:
        """The saved table's width: d_model (a table added to the embeddings)."""
        return int(spec["d_model"])

    def saved_table(self, rows: int, width: int, pad: int | None) -> Tensor:
        """The (rows, width) table a checkpoint saves, row p for position id p: Vaswani et
        al.'s frequencies, sines then cosines (Marian, Pegasus, RoFormer)."""
        return sinusoidal_table(torch.arange(rows), width, layout="halves")

    def saved_rows(self, spec: Mapping[str, Any]) -> int:
        """Rows of the table export writes: one per position (max_len)."""
        return int(spec["max_len"])

    def import_state(
        self, src: TensorSource, config: dict[str, Any], names: Any, ctx: dict[str, Any]
    ) -> dict[str, Tensor]:
        for name in src.names():
            if not name.endswith("embed_positions.weight"):
                continue
            saved = src.tensors[name]
            n, dim = saved.shape
            table = self.saved_table(n, dim, get(config, "pad_token_id", None))  # (n, dim)
            err = (saved.float() - table).abs().max().item()
            if not err <= 1e-3:
                raise ConversionError(
                    f"{src.where}: {name} is not the sinusoidal table (max |diff| {err:.3g}); "
                    "trained position tables are not supported for this type"
                )
        return super().import_state(src, config, names, ctx)

    def export_state(
        self,
        state: Mapping[str, Tensor],
        names: Any,
        ctx: dict[str, Any],
        prefix: str | None = None,
        task: str | None = None,
    ) -> dict[str, Tensor]:
        """The table's tensors plus the sinusoidal table each stack saves (max_len rows)."""
        out = super().export_state(state, names, ctx, prefix, task)
        prefix = self.export_prefix(task) if prefix is None else prefix
        dtype = next((t.dtype for t in state.values() if t.is_floating_point()), None)
        n, dim = self.saved_rows(ctx), self.sinusoid_width(ctx)
        table = self.saved_table(n, dim, ctx.get("pad_token_id")).to(dtype)  # (n, dim)
        for stack in self.saved_sinusoids:
            out[f"{prefix}{stack}.embed_positions.weight"] = table
        return out


class MarianConverter(
    SavedSinusoidsConverter, model_type="marian", hf_prefix="Marian", family="encoder-decoder"
):
    requires = {"share_encoder_decoder_embeddings": True}
    fixed = bart_parts("post_ln", "token", "{kind: sinusoidal, layout: halves}")
    fields = BART_FIELDS
    tasks = {"Model": HEADLESS, "MTModel": LM_FIXED_BIAS, "ForCausalLM": DECODER_LM}
    # the sinusoidal table is saved as a frozen weight; archzoo computes it
    tensors = table(
        BART_TENSORS,
        prefixes=("model.", ""),
        stacks=BART_STACKS,
        ignore=("{s}.embed_positions.weight",),
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """A separate decoder vocabulary (decoder_vocab_size) has no archzoo equivalent."""
        vocab = get(config, "decoder_vocab_size", None)
        if vocab not in (None, spec["vocab_size"]):
            raise ConversionError(
                f"config.json decoder_vocab_size={vocab} differs from vocab_size="
                f"{spec['vocab_size']}: separate decoder vocabularies are not supported"
            )
