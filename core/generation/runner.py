"""What every decoding strategy shares: the resolved arguments, the runner that feeds tokens
to the model over its KV cache, and transformers' logits processors."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ..specs.plan import stack_roles


@dataclass
class Settings:
    """Resolved generation arguments."""

    max_new_tokens: int
    min_new_tokens: int
    do_sample: bool
    temperature: float
    top_k: int | None
    top_p: float | None
    num_beams: int
    length_penalty: float
    early_stopping: bool | str
    eos: list[int]
    pad: int | None
    forced_eos: int | None
    use_cache: bool
    generator: torch.Generator | None
    on_token: Callable[[Tensor], None] | None = None
    eos_ids: Tensor | None = None  # `eos` as a tensor on the inputs' device (made once)


class Runner:
    """Feeds tokens to the model (with or without a cache) and returns last-position logits."""

    def __init__(
        self,
        model: nn.Module,  # a ZooModel
        batch: int,
        capacity: int,
        *,
        use_cache: bool,
        attention_mask: Tensor | None,
        encoder_out: Tensor | None,
        encoder_mask: Tensor | None,
    ) -> None:
        self.model = model
        self.seq2seq = stack_roles(model.family)[-1].cross
        self.cache = model.new_cache(batch, capacity) if use_cache else None
        self.mask = (
            attention_mask  # decoder-only: (B, L) over every token so far; None if no padding
        )
        self.encoder_out, self.encoder_mask = encoder_out, encoder_mask
        self.ids: Tensor | None = None  # every token so far
        self.positions: Tensor | None = None

    def start(self, ids: Tensor) -> Tensor:
        """Run the prompt (B, L); return logits (B, V) for the next token."""
        if self.mask is not None:  # left padding: the position scheme numbers the prompt
            pos = self.model.decoder.position.prompt_ids(self.mask)
        else:
            pos = torch.arange(ids.shape[1], device=ids.device).expand_as(ids)
        self.ids, self.positions = ids, pos
        return self._run(ids, pos)

    def step(self, token: Tensor) -> Tensor:
        """Append one token per row (B,); return logits (B, V) for the next one."""
        token = token[:, None]
        pos = self.positions[:, -1:] + 1
        if self.mask is not None:
            self.mask = torch.cat([self.mask, self.mask.new_ones(self.mask.shape[0], 1)], dim=1)
        cached = self.ids.shape[1]
        self.ids = torch.cat([self.ids, token], dim=1)
        self.positions = torch.cat([self.positions, pos], dim=1)
        if self.cache is not None and self.model.stale_cache(cached, cached + 1):
            self.cache.reset()  # the position scheme changed: re-run every token, as HF does
            return self._run(self.ids, self.positions)
        if self.cache is None:
            return self._run(self.ids, self.positions)
        return self._run(token, pos)

    def reorder(self, index: Tensor) -> None:
        """Keep rows `index` (beam search)."""
        if self.cache is not None:
            self.cache.reorder(index)
        self.ids = self.ids.index_select(0, index) if self.ids is not None else None
        self.positions = self.positions.index_select(0, index)
        if self.mask is not None:
            self.mask = self.mask.index_select(0, index)

    def _run(self, ids: Tensor, pos: Tensor) -> Tensor:
        if self.seq2seq:
            out = self.model(
                attention_mask=self.encoder_mask,
                decoder_input_ids=ids,
                position_ids=pos,
                cache=self.cache,
                encoder_outputs=self.encoder_out,
                logits_to_keep=1,
            )
        else:
            out = self.model(
                ids, attention_mask=self.mask, position_ids=pos, cache=self.cache, logits_to_keep=1
            )
        return out.logits[:, -1]  # (B, V) in the model's dtype


def process_scores(scores: Tensor, step: int, s: Settings, *, warp: bool) -> Tensor:
    """transformers' logits processors in their order: min new tokens, forced EOS, warpers."""
    if s.eos and step < s.min_new_tokens:
        scores.index_fill_(-1, s.eos_ids, -float("inf"))  # set with eos by generate
    if s.forced_eos is not None and step == s.max_new_tokens - 1:
        scores[:] = -float("inf")
        scores[:, s.forced_eos] = 0.0
    if not (warp and s.do_sample):
        return scores
    # beam sampling keeps a token besides every eos per beam, as transformers' warpers do
    min_keep = max(2, len(s.eos) + 1) if s.num_beams > 1 else 1
    if s.temperature != 1.0:
        scores = scores / s.temperature
    if s.top_k is not None and s.top_k > 0:
        k = min(max(s.top_k, min_keep), scores.shape[-1])
        kth = torch.topk(scores, k, dim=-1).values[..., -1:]
        scores = scores.masked_fill(scores < kth, -float("inf"))
    if s.top_p is not None and s.top_p < 1.0:
        sorted_scores, order = torch.sort(scores, descending=False)
        cumulative = sorted_scores.softmax(-1).cumsum(-1)
        drop_sorted = cumulative <= 1 - s.top_p
        drop_sorted[..., -min_keep:] = False  # always keep the most likely token(s)
        drop = drop_sorted.scatter(1, order, drop_sorted)
        scores = scores.masked_fill(drop, -float("inf"))
    return scores


def repeat_rows(t: Tensor | None, k: int) -> Tensor | None:
    """Each row k times in a row (B*k, ...), as beam search lays out its beams."""
    return t if t is None or k == 1 else t.repeat_interleave(k, dim=0)
