"""Generation with transformers' conventions: greedy, sampling and beam search over a KV cache."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from ..parts.input_checks import trusted_inputs
from ..specs.plan import stack_roles
from .beam import beam_search
from .checks import check_arguments, check_generation
from .runner import Runner, Settings, process_scores, repeat_rows

TOP_K = 50  # transformers' top_k when a call leaves it unset (None or 0 keep every token)


def _as_list(value: int | list[int] | None) -> list[int]:
    if value is None:
        return []
    return [value] if isinstance(value, int) else list(value)


def generate(
    model: nn.Module,  # a ZooModel
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
        model.head.dims.vocab_size,  # the generated ids: the vocabulary the head scores
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
        runner = Runner(  # beam search runs num_beams rows per prompt
            model,
            prompt.shape[0] * num_beams,
            prompt.shape[1] + max_new_tokens,
            use_cache=s.use_cache,
            attention_mask=repeat_rows(dec_mask, num_beams),
            encoder_out=repeat_rows(encoder_out, num_beams),
            encoder_mask=repeat_rows(enc_mask, num_beams),
        )
        if num_beams > 1:
            return beam_search(runner, prompt, s)
        return _sample(runner, prompt, s)


def _infer_mask(ids: Tensor, pad: int | None, eos: list[int]) -> Tensor:
    """transformers' rule: mask out pad tokens when pad is known and differs from every eos."""
    if pad is not None and pad not in eos and bool((ids == pad).any()):
        return ids.ne(pad).long()
    return torch.ones_like(ids)


def _sample(runner: Runner, prompt: Tensor, s: Settings) -> Tensor:
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
            scores = process_scores(logits.float(), step, s, warp=True)
            probs = scores.softmax(-1)
            token = torch.multinomial(probs, 1, generator=s.generator).squeeze(1)
        else:  # max's index is the first maximal one, as argmax's (and ~5x faster in bf16)
            token = process_scores(logits, step, s, warp=False).max(-1).indices
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
