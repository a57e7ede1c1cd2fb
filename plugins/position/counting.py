"""Position ids counted over real tokens (RoBERTa, M2M-100: HF's padding-aware numbering)."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from archzoo.parts.component import param

COUNTS = ("index", "tokens", "absolute")
PAD_POSITION = -1  # the id a padding token gets when positions count tokens


def count_param() -> Any:
    """The `count` parameter of an embedded position: by index, or over non-pad tokens."""
    return param(
        "index",
        "ids when none are given: by index (generate: a padded prompt's real tokens from 0); "
        "tokens: real tokens count 0, 1, ... skipping pad_token_id, pads get -1 (RoBERTa, "
        "M2M-100); absolute: by index, pads included, in generate too (BART-family decoders)",
        choices=COUNTS,
    )


def token_positions(input_ids: Tensor, pad: int, past: int) -> Tensor:
    """(B, T) ids: past + the count of real tokens so far - 1; pads PAD_POSITION."""
    real = input_ids != pad  # (B, T)
    counted = real.long().cumsum(-1) + (past - 1)  # (B, T)
    return counted.masked_fill(~real, PAD_POSITION)


class CountedPositions:
    """Mixin for an embedded position with a `count` parameter (cfg.count)."""

    cfg: Any
    dims: Any

    def position_ids(self, input_ids: Tensor, past: int) -> Tensor:
        if self.cfg.count == "tokens":
            return token_positions(input_ids, self.dims.pad_token_id, past)
        return super().position_ids(input_ids, past)  # type: ignore[misc]

    def prompt_ids(self, attention_mask: Tensor) -> Tensor:
        if self.cfg.count == "absolute":  # padding keeps its slots: ids by index
            B, L = attention_mask.shape
            return torch.arange(L, device=attention_mask.device).expand(B, L)
        return super().prompt_ids(attention_mask)  # type: ignore[misc]

    @staticmethod
    def count_problems(cfg: Any, dims: Any) -> list[tuple[str, str]]:
        """count: tokens needs the spec's pad_token_id."""
        if cfg.count == "tokens" and dims.pad_token_id is None:
            return [("count", "count: tokens numbers positions around pad_token_id; set it")]
        return []
