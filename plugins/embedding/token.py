"""Token embedding with optional segment embeddings, sqrt(d) scaling, norm and dropout."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor, nn

from archzoo.parts.component import dropout_param, param
from archzoo.parts.interfaces import Embedding, NormFactory

TASK_TYPES = "task_type_ids"  # the per-batch input a task-type table reads


class TokenEmbedding(Embedding, name="token"):
    """token table (+ token types), optional sqrt(d) scale, embedding norm and dropout"""

    class Config:
        type_vocab_size: int = param(
            0, "segment/token-type ids (BERT: 2); 0 for none", min=0, max=65536
        )
        word_types: bool = param(False, "token_type_ids index the token table instead (XLM)")
        attention_types: int = param(
            0,
            "token_type_ids (ids below this) taken without a table: an attention reads them "
            "(pooled_relative's segment term, Funnel); 0 for none",
            min=0,
            max=65536,
        )
        n_langs: int = param(
            0, "language ids (XLM's `langs` input) with a table of their own", min=0
        )
        task_types: int = param(
            0,
            "task-type ids (the `task_type_ids` input, zeros when not given) with a table of "
            "their own, added after the positions (ERNIE's use_task_id); 0 for none",
            min=0,
            max=65536,
        )
        token_dropout: float = param(
            0.0,
            "the share of tokens masked in training (ESM: 0.15 x 0.8): mask_token_id's vectors "
            "are zeroed and every row scaled by (1 - share) / (1 - its masked share); 0: off",
            min=0.0,
            lt=1.0,
        )
        mask_token_id: int | None = param(None, "token_dropout: the mask token's id", min=0)
        scale: bool = param(False, "multiply token vectors by sqrt(d_model) (Vaswani et al.)")
        multiplier: float = param(
            1.0, "multiply token vectors by this constant (Granite's embedding_multiplier)", gt=0.0
        )
        round_scale: bool = param(
            False, "round sqrt(d_model) to the table's dtype first (Gemma: a bf16 constant)"
        )
        norm: bool = param(False, "normalise the summed embeddings (BERT)")
        zero_padded: bool = param(False, "zero the vectors of padded positions (DeBERTa)")
        positions_first: bool = param(
            False,
            "add the position vectors to the token vectors first, then languages and types "
            "(DeBERTa's and XLM's order; default: positions last, as BERT)",
        )
        positions_after_norm: bool = param(
            False,
            "add the position vectors after the embedding norm, not before it "
            "(BlenderbotSmall's decoder normalises the token vectors alone)",
        )
        global_tokens: int = param(
            0,
            "learned vectors placed before the tokens, after dropout: every layer sees them and "
            "the stack drops them from its output (PEGASUS-X's global tokens); 0 for none",
            min=0,
        )
        predict_streams: int = param(
            0,
            "predicting streams placed after the tokens (ProphetNet's ngram): stream s adds "
            "learned vector s - 1 (stream 0 the last vector) to the next position's vector, "
            "normed and dropped out as the tokens are; the stack runs them beside the tokens "
            "and an LM head scores stream 0 (needs an n-stream attention); 0 for none",
            min=0,
        )
        dropout: float | None = dropout_param("dropout on the output (null: model dropout)")

    def __init__(self, cfg: Any, dims: Any, *, make_norm: NormFactory) -> None:
        super().__init__(cfg, dims)
        self.word = nn.Embedding(dims.vocab_size, self.embed_width(cfg, dims))
        width = self.sum_width(cfg, dims)  # of the types, languages and the norm
        self.token_type = nn.Embedding(cfg.type_vocab_size, width) if cfg.type_vocab_size else None
        n_langs = getattr(cfg, "n_langs", 0)  # subclasses with a Config of their own
        self.lang = nn.Embedding(n_langs, width) if n_langs else None
        task_types = getattr(cfg, "task_types", 0)
        self.task_type = nn.Embedding(task_types, width) if task_types else None
        self.inputs = (TASK_TYPES,) if task_types else ()
        self.token_dropout = getattr(cfg, "token_dropout", 0.0)
        if self.token_dropout:  # each row's masked share counts its real tokens
            self.inputs = (*self.inputs, "attention_mask")
        self.word_types = getattr(cfg, "word_types", False)
        self.positions_first = getattr(cfg, "positions_first", False)
        self.positions_after_norm = getattr(cfg, "positions_after_norm", False)
        self.norm = make_norm(dim=width) if cfg.norm else None
        self.dropout = nn.Dropout(dims.dropout if cfg.dropout is None else cfg.dropout)
        self.multiplier = (self.embed_width(cfg, dims) ** 0.5 if cfg.scale else 1.0) * getattr(
            cfg, "multiplier", 1.0
        )
        self.round_scale = getattr(cfg, "round_scale", False)  # subclasses' Configs
        self.prefix_tokens = getattr(cfg, "global_tokens", 0)
        self.global_table = (
            nn.Embedding(self.prefix_tokens, width) if self.prefix_tokens else None
        )  # (G, W): the global tokens' vectors
        self.predict_streams = getattr(cfg, "predict_streams", 0)
        self.stream_table = (
            nn.Embedding(self.predict_streams, width) if self.predict_streams else None
        )  # (n, W): the predicting streams' vectors

    @classmethod
    def sum_width(cls, cfg: Any, dims: Any) -> int:
        """Width of the sum the token types, positions and the norm join (embed_width here)."""
        return cls.embed_width(cfg, dims)

    def token_vectors(self, x: Tensor) -> Tensor:
        """The token vectors (B, T, embed_width) as the sum takes them: unchanged here."""
        return x

    def word_weight(self) -> nn.Parameter:
        return self.word.weight

    def share_word_weight(self, other: Embedding) -> None:
        """Use `other`'s token table (encoder-decoder models with one vocabulary)."""
        weight = other.word_weight()
        if weight.shape != self.word.weight.shape:
            raise ValueError(
                f"cannot share a {tuple(weight.shape)} token table with a {self.name!r} "
                f"embedding of shape {tuple(self.word.weight.shape)}"
            )
        self.word.weight = weight

    def segment_types(self) -> int:
        if self.word_types:
            return self.dims.vocab_size
        return self.cfg.type_vocab_size or getattr(self.cfg, "attention_types", 0)

    def languages(self) -> int:
        return 0 if self.lang is None else self.lang.num_embeddings

    @classmethod
    def check(cls, cfg: Any, dims: Any) -> list[tuple[str, str]]:
        if getattr(cfg, "token_dropout", 0.0) and getattr(cfg, "mask_token_id", None) is None:
            return [("mask_token_id", "token_dropout zeroes the mask token's vectors: set it")]
        return []

    def rescale_masked(self, x: Tensor, input_ids: Tensor, attention_mask: Tensor | None) -> Tensor:
        """ESM's token dropout at inference: mask tokens' vectors zeroed, each row (B, T, W)
        times (1 - share) / (1 - the share of its real tokens that are masks)."""
        masked = input_ids == self.cfg.mask_token_id  # (B, T)
        x = x.masked_fill(masked[..., None], 0.0)
        if attention_mask is None:
            lengths = x.new_full(input_ids.shape[:1], input_ids.shape[1], dtype=torch.float32)
        else:
            lengths = attention_mask[:, -input_ids.shape[1] :].sum(-1).float()  # (B,)
        observed = masked.sum(-1).float() / lengths  # (B,)
        scale = (1 - self.token_dropout) / (1 - observed)  # (B,)
        return (x * scale[:, None, None]).to(x.dtype)

    def task_type_ids(self, input_ids: Tensor, given: Tensor | None) -> Tensor:
        """The batch's task types (B, T), zeros when not given; out-of-range ids refused."""
        if given is None:
            return input_ids.new_zeros(input_ids.shape)
        n = self.task_type.num_embeddings
        if tuple(given.shape) != tuple(input_ids.shape):
            raise ValueError(
                f"{TASK_TYPES} of shape {tuple(given.shape)} does not match input_ids' "
                f"{tuple(input_ids.shape)}"
            )
        if (
            given.device.type != "meta"
            and given.numel()
            and not 0 <= int(given.min()) <= int(given.max()) < n
        ):
            raise ValueError(f"{TASK_TYPES} must lie in [0, {n}) (embedding.task_types {n})")
        return given.to(device=input_ids.device, dtype=torch.long)

    def embed(
        self,
        input_ids: Tensor,
        token_type_ids: Tensor | None,
        position_embeds: Tensor | None,
        langs: Tensor | None = None,
        task_type_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
    ) -> Tensor:
        """Scaled token vectors (+ languages) + token types + positions, normalised:
        (B, T, sum_width)."""
        x = self.word(input_ids)  # (B, T, W)
        if self.multiplier != 1.0:
            x = x * (x.new_tensor(self.multiplier) if self.round_scale else self.multiplier)
        if self.token_dropout:
            x = self.rescale_masked(x, input_ids, attention_mask)
        x = self.token_vectors(x)  # (B, T, sum_width)
        if self.positions_first and position_embeds is not None:
            x, position_embeds = x + position_embeds.to(x.dtype), None
        if self.lang is not None and langs is not None:
            x = x + self.lang(langs)
        if self.token_type is not None:
            if token_type_ids is None:
                token_type_ids = input_ids.new_zeros(input_ids.shape)
            x = x + self.token_type(token_type_ids)
        elif self.word_types and token_type_ids is not None:
            x = x + self.word(token_type_ids)
        late = None
        if self.positions_after_norm:
            late, position_embeds = position_embeds, None
        if position_embeds is not None:
            x = x + position_embeds.to(x.dtype)
        if self.task_type is not None:
            x = x + self.task_type(self.task_type_ids(input_ids, task_type_ids))
        if self.norm is not None:
            x = self.norm(x)
        return x if late is None else x + late.to(x.dtype)

    def forward(
        self,
        input_ids: Tensor,
        token_type_ids: Tensor | None = None,
        position_embeds: Tensor | None = None,
        langs: Tensor | None = None,
        inputs: Mapping[str, Tensor] | None = None,
    ) -> Tensor:
        late = self.late_positions()
        given = inputs or {}
        x = self.embed(
            input_ids,
            token_type_ids,
            None if late else position_embeds,
            langs,
            given.get(TASK_TYPES),
            given.get("attention_mask"),
        )
        return self.finish(x, position_embeds if late else None)

    def stream_vectors(self, next_positions: Tensor) -> Tensor:
        """The predicting streams (B, n T, W) from the next positions' vectors (B, T, W):
        stream s is vector s - 1 plus them, normed, stream after stream."""
        table = self.stream_table.weight.roll(1, dims=0)  # (n, W): stream s reads row s - 1
        x = table[None, :, None].to(next_positions.dtype) + next_positions[:, None]
        if self.norm is not None:
            x = self.norm(x)  # (B, n, T, W)
        x = self.dropout(x) if self.dropout.training else x
        return x.flatten(1, 2)

    def late_positions(self) -> bool:
        """Whether the position vectors join after `finish` projects, not the embedded sum."""
        return False

    def finish(self, x: Tensor, positions: Tensor | None) -> Tensor:
        """The embedded sum (B, T, embed_width) to the output; `positions`: late ones, if any.
        With global tokens: (B, G + T, embed_width), the G vectors first."""
        x = self.dropout(x) if self.dropout.training else x
        if self.global_table is None:
            return x
        glob = self.global_table.weight.to(x.dtype).expand(x.shape[0], -1, -1)  # (B, G, W)
        return torch.cat([glob, x], dim=1)
