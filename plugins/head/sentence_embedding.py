"""Sentence embeddings (sentence-transformers, CLIP's text tower): pool the real tokens or
read one token's state, optionally project, optionally normalise."""

from __future__ import annotations

from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from archzoo.parts.component import param

from .none import NoHead
from .pooling import pool


class SentenceEmbeddingHead(NoHead, name="sentence_embedding", token_ids=True):
    """pool real tokens (cls | mean | max | last) or read a token's state (first_eos |
    max_id), optionally project bias-free, optionally to unit norm: (B, D or projection)

    The base model's outputs plus `sentence_embedding`.
    """

    class Config:
        pooling: Literal["cls", "mean", "max", "last", "first_eos", "max_id"] = param(
            "mean",
            "how the token vectors become one sentence vector (first_eos: the state at each "
            "row's first eos_token_id in input_ids, CLIP's end-of-text; max_id: at each row's "
            "highest token id, where end-of-text is the vocabulary's last token)",
        )
        eos_token_id: int | None = param(
            None, "pooling first_eos: the token id whose first place is read", min=0
        )
        projection: int | None = param(
            None, "a bias-free projection of the pooled vector to this width (CLIP's)", min=1
        )
        normalize: bool = param(False, "scale the sentence embedding to unit L2 norm")
        pooler: bool = param(
            False, "BERT's pooler kept from the checkpoint, returned as pooler_output"
        )

    def __init__(self, cfg: Any, dims: Any, **parts: Any) -> None:
        super().__init__(cfg, dims, **parts)
        width = cfg.projection
        self.projection = nn.Linear(dims.d_model, width, bias=False) if width else None

    @classmethod
    def check(cls, cfg: Any, dims: Any) -> list[tuple[str, str]]:
        if cfg.pooling == "first_eos" and cfg.eos_token_id is None:
            return [("eos_token_id", "pooling: first_eos needs the eos_token_id to read at")]
        return []

    def forward(
        self,
        hidden: Tensor,
        attention_mask: Tensor | None = None,
        input_ids: Tensor | None = None,
    ) -> dict[str, Tensor]:
        out = super().forward(hidden, attention_mask) or {}
        how = self.cfg.pooling
        if how in ("first_eos", "max_id"):
            x = at_token(hidden, input_ids, how, self.cfg.eos_token_id)  # (B, D)
        else:
            x = pool(hidden, attention_mask, how)  # (B, D)
        if self.projection is not None:
            x = self.projection(x)  # (B, projection)
        out["sentence_embedding"] = F.normalize(x, dim=-1) if self.cfg.normalize else x
        return out


def at_token(hidden: Tensor, input_ids: Tensor | None, how: str, eos: int | None) -> Tensor:
    """(B, T, D) -> (B, D): the state at each row's first `eos` in input_ids (first_eos), or
    at its highest token id (max_id; the first place of it on a tie)."""
    if input_ids is None or input_ids.shape != hidden.shape[:2]:
        raise ValueError(
            f"sentence_embedding: pooling {how} reads input_ids of the states' shape "
            f"{tuple(hidden.shape[:2])}; pass them"
        )
    if how == "max_id":
        place = input_ids.argmax(dim=-1)  # (B,)
    else:
        hits = input_ids == eos  # (B, T)
        if not torch.compiler.is_compiling() and hits.device.type != "meta":
            missing = (~hits.any(dim=1)).nonzero().flatten().tolist()
            if missing:
                raise ValueError(
                    f"sentence_embedding: pooling first_eos: row {missing[0]} of input_ids "
                    f"has no token {eos}"
                )
        place = hits.int().argmax(dim=-1)  # (B,): the first hit
    return hidden[torch.arange(hidden.shape[0], device=hidden.device), place]
