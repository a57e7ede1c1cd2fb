"""Generation with transformers' conventions: greedy, sampling and beam search over a KV cache."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import Tensor

from ..parts.input_checks import trusted_inputs
from ..specs.plan import stack_roles
from .checks import check_arguments, check_generation

if TYPE_CHECKING:
    from ..model.zoo_model import ZooModel

NEG = -1.0e9  # transformers' "impossible" score in beam search
TOP_K = 50  # transformers' top_k when a call leaves it unset (None or 0 keep every token)


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


class _Runner:
    """Feeds tokens to the model (with or without a cache) and returns last-position logits."""

    def __init__(
        self,
        model: ZooModel,
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


def _as_list(value: int | list[int] | None) -> list[int]:
    if value is None:
        return []
    return [value] if isinstance(value, int) else list(value)


def _process(scores: Tensor, step: int, s: Settings, *, warp: bool) -> Tensor:
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


def generate(
    model: ZooModel,
    input_ids: Tensor,
    attention_mask: Tensor | None = None,
    *,
    max_new_tokens: int = 20,
    min_new_tokens: int = 0,
    do_sample: bool = False,
    temperature: float = 1.0,
    top_k: int | None = TOP_K,
    top_p: float | None = None,
    num_beams: int = 1,
    length_penalty: float = 1.0,
    early_stopping: bool | str = False,
    eos_token_id: int | list[int] | None = None,
    pad_token_id: int | None = None,
    decoder_start_token_id: int | None = None,
    forced_eos_token_id: int | None = None,
    use_cache: bool | None = None,
    generator: torch.Generator | None = None,
    on_token: Callable[[Tensor], None] | None = None,
) -> Tensor:
    """Generate token ids as transformers' `generate` does.

    Decoder-only models return prompt + new tokens; encoder-decoder models return decoder
    tokens starting with the decoder start token. eos/pad/start default to the spec's ids.
    Sampling keeps the `top_k` most likely tokens (50 unless given, as transformers; None or
    0: every token).
    `on_token(tokens)` is called with each step's (B,) new tokens (refused with beam search).
    `use_cache=None` decodes with a KV cache when every attention layer supports one and
    re-runs the whole sequence each step otherwise; True insists on the cache.
    """
    spec = model.spec.data
    role = stack_roles(model.family)[-1]
    if not role.causal:
        raise ValueError("an encoder-only model cannot generate; use a decoder or encoder-decoder")
    if not model.head.capabilities.generates:
        raise ValueError(
            f"head {model.head.name!r} does not score the next token (capability `generates`), "
            "so this model cannot generate; use a head that does, such as 'lm'"
        )
    args = dict(  # checked, then passed on to Settings as they are
        max_new_tokens=max_new_tokens,
        min_new_tokens=min_new_tokens,
        do_sample=do_sample,
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        num_beams=num_beams,
        length_penalty=length_penalty,
        early_stopping=early_stopping,
        generator=generator,
        on_token=on_token,
    )
    check_arguments(  # the ids and use_cache are resolved against the spec below
        spec["vocab_size"],
        **args,
        eos_token_id=eos_token_id,
        pad_token_id=pad_token_id,
        decoder_start_token_id=decoder_start_token_id,
        forced_eos_token_id=forced_eos_token_id,
        use_cache=use_cache,
    )
    eos = _as_list(eos_token_id if eos_token_id is not None else spec.get("eos_token_id"))
    pad = pad_token_id if pad_token_id is not None else spec.get("pad_token_id")
    if pad is None and eos:
        pad = eos[0]
    s = Settings(
        **args,
        eos=eos,
        pad=pad,
        forced_eos=forced_eos_token_id
        if forced_eos_token_id is not None
        else spec.get("forced_eos_token_id"),
        use_cache=model.supports_cache() if use_cache is None else use_cache,
    )
    check_generation(
        model,
        input_ids,
        attention_mask,
        max_new_tokens=max_new_tokens,
        num_beams=num_beams,
        use_cache=s.use_cache,
        seq2seq=role.cross,
    )
    s.eos_ids = torch.tensor(eos, device=input_ids.device) if eos else None
    if attention_mask is None:  # transformers infers it for decoder-only models only
        attention_mask = (
            torch.ones_like(input_ids) if role.cross else _infer_mask(input_ids, pad, eos)
        )
    with torch.inference_mode(), trusted_inputs():  # checked above; steps feed their own
        if role.cross:
            start = decoder_start_token_id
            if start is None:
                start = spec.get("decoder_start_token_id")
            if start is None:
                start = spec.get("pad_token_id")
            if start is None:
                raise ValueError("decoder_start_token_id is not set (in the call or the spec)")
            enc_mask = None if bool(attention_mask.all()) else attention_mask
            encoder_out = model.encoder(input_ids, enc_mask)
            prompt = input_ids.new_full((input_ids.shape[0], 1), start)
            dec_mask = None
        else:
            encoder_out = enc_mask = None
            prompt = input_ids
            dec_mask = None if bool(attention_mask.all()) else attention_mask
        runner = _Runner(  # beam search runs num_beams rows per prompt
            model,
            prompt.shape[0] * num_beams,
            prompt.shape[1] + max_new_tokens,
            use_cache=s.use_cache,
            attention_mask=_repeat(dec_mask, num_beams),
            encoder_out=_repeat(encoder_out, num_beams),
            encoder_mask=_repeat(enc_mask, num_beams),
        )
        if num_beams > 1:
            return _beam_search(runner, prompt, s)
        return _sample(runner, prompt, s)


def _repeat(t: Tensor | None, k: int) -> Tensor | None:
    """Each row k times in a row (B*k, ...), as beam search lays out its beams."""
    return t if t is None or k == 1 else t.repeat_interleave(k, dim=0)


def _infer_mask(ids: Tensor, pad: int | None, eos: list[int]) -> Tensor:
    """transformers' rule: mask out pad tokens when pad is known and differs from every eos."""
    if pad is not None and pad not in eos and bool((ids == pad).any()):
        return ids.ne(pad).long()
    return torch.ones_like(ids)


def _sample(runner: _Runner, prompt: Tensor, s: Settings) -> Tensor:
    """Greedy or sampled decoding, one token per row per step.

    Sampling scores are fp32, as transformers'. Greedy picks the first maximal score of the
    model's own logits: widening a 16-bit float to fp32 is exact and keeps the order, so it
    is the token fp32 scores give, without a full-vocabulary copy per step. Finished rows are
    tracked on the host from each step's tokens (one read per step, as `any()` was).
    """
    B, L = prompt.shape
    out = prompt.new_empty(B, L + s.max_new_tokens)  # written in place, never re-allocated
    out[:, :L] = prompt
    eos = set(s.eos)
    finished = [False] * B
    done: Tensor | None = None  # (B,) bool once a row has finished: its tokens become pad
    logits = runner.start(prompt)
    n = 0
    for step in range(s.max_new_tokens):
        if s.do_sample:
            scores = _process(logits.float(), step, s, warp=True)
            probs = scores.softmax(-1)
            token = torch.multinomial(probs, 1, generator=s.generator).squeeze(1)
        else:  # max's index is the first maximal one, as argmax's (and ~5x faster in bf16)
            token = _process(logits, step, s, warp=False).max(-1).indices
        if done is not None:
            token = token.masked_fill(done, s.pad)
        out[:, L + step] = token
        n = step + 1
        if s.on_token is not None:
            s.on_token(token)
        if eos:
            hits = [i for i, t in enumerate(token.tolist()) if t in eos and not finished[i]]
            for i in hits:
                finished[i] = True
            if all(finished):
                break
            if hits:
                done = torch.tensor(finished, device=token.device)
        if step + 1 < s.max_new_tokens:
            logits = runner.step(token)
    return out[:, : L + n]


def _beam_search(runner: _Runner, prompt: Tensor, s: Settings) -> Tensor:
    """Beam search with transformers' scoring, length penalty and stopping rules."""
    B, L = prompt.shape
    K, dev = s.num_beams, prompt.device
    max_len = L + s.max_new_tokens
    fill = s.pad if s.pad else (s.eos[0] if s.eos else -1)  # transformers' `pad or eos[0]`
    keep = max(2, 1 + len(s.eos)) * K
    top_mask = torch.arange(keep, device=dev) < K
    eos = s.eos_ids

    running = prompt.new_full((B, K, max_len), fill)
    running[:, :, :L] = prompt[:, None]
    finished_seqs = running.clone()
    running_scores = torch.zeros(B, K, device=dev)
    running_scores[:, 1:] = NEG
    finished_scores = torch.full((B, K), NEG, device=dev)
    finished = torch.zeros(B, K, dtype=torch.bool, device=dev)
    finished_len = torch.zeros(B, K, dtype=torch.long, device=dev)
    can_improve = torch.ones(B, 1, dtype=torch.bool, device=dev)
    offsets = torch.arange(B, device=dev)[:, None] * K

    logits = runner.start(_repeat(prompt, K))
    cur = L
    while True:
        log_probs = _process(F.log_softmax(logits.float(), dim=-1), cur - L, s, warp=True)
        V = log_probs.shape[-1]
        total = (log_probs.view(B, K, V) + running_scores[:, :, None]).view(B, K * V)
        if s.do_sample:
            idx = torch.multinomial(total.softmax(-1), keep, generator=s.generator)
            cand_scores, order = total.gather(1, idx).sort(dim=-1, descending=True)
            idx = idx.gather(1, order)  # best first, as transformers orders the draws
        else:
            cand_scores, idx = torch.topk(total, keep)
        src, token = idx // V, idx % V  # (B, keep) source beam and new token
        cand = running.gather(1, src[:, :, None].expand(B, keep, max_len)).clone()
        cand[:, :, cur] = token
        hits = torch.full_like(token, cur + 1 >= max_len, dtype=torch.bool)
        if eos is not None:
            hits |= torch.isin(token, eos)

        # the best unfinished candidates keep running
        live_scores = cand_scores + hits.float() * NEG
        chosen = torch.topk(live_scores, K).indices
        running = cand.gather(1, chosen[:, :, None].expand(B, K, max_len))
        running_scores = live_scores.gather(1, chosen)
        beam_origin = src.gather(1, chosen)  # (B, K)

        # finished candidates among the top K compete with earlier finished ones
        just_done = hits & top_mask[None]
        done_scores = cand_scores / ((cur + 1 - L) ** s.length_penalty)
        full = finished.all(-1, keepdim=True) & (s.early_stopping is True)
        done_scores = done_scores + full.float() * NEG + (~can_improve).float() * NEG
        done_scores = done_scores + (~just_done).float() * NEG
        merged_scores = torch.cat([finished_scores, done_scores], dim=1)
        best = torch.topk(merged_scores, K).indices
        finished_seqs = torch.cat([finished_seqs, cand], 1).gather(
            1, best[:, :, None].expand(B, K, max_len)
        )
        finished_scores = merged_scores.gather(1, best)
        finished = torch.cat([finished, just_done], 1).gather(1, best)
        new_len = torch.full_like(just_done, cur + 1 - L, dtype=torch.long)
        finished_len = torch.cat([finished_len, new_len], 1).gather(1, best)

        cur += 1
        if s.early_stopping == "never" and s.length_penalty > 0.0:
            best_len = max_len - L
        else:
            best_len = cur - L
        best_running = running_scores[:, :1] / (best_len**s.length_penalty)
        worst_done = torch.where(finished, finished_scores.min(1, keepdim=True).values, NEG)
        can_improve = can_improve & (best_running > worst_done).any(-1, keepdim=True)
        open_beams = not (bool(finished.all()) and s.early_stopping is True)
        if not (bool(can_improve.any()) and open_beams and not bool(hits.all())):
            break
        runner.reorder((beam_origin + offsets).view(-1))
        logits = runner.step(running[:, :, cur - 1].reshape(-1))

    length = L + int(finished_len[:, 0].max())
    return finished_seqs[:, 0, :length]
