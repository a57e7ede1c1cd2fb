"""What `generate` refuses before any work: bad prompts or masks, positions the decoder cannot
encode, and caches or buffers larger than the device's free memory."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn

from ..memory import check_fits
from ..parts.costs import kv_cache_values, state_bytes
from ..parts.input_checks import InputChecks

MIN_TEMPERATURE = 1e-5  # below it, sampled scores / temperature overflow float32
LOG_FLOAT32_RANGE = 87.0  # e**87 and e**-87 are finite, non-zero float32 values
TOKEN_BUFFERS = 6  # int64 (rows, length) buffers beam search keeps (running, finished, candidates)


def check_generation(
    model: nn.Module,  # a ZooModel
    input_ids: Tensor,
    attention_mask: Tensor | None,
    *,
    max_new_tokens: int,
    num_beams: int,
    use_cache: bool,
    seq2seq: bool,
) -> None:
    """Raise ValueError (naming the argument) for a request that cannot run."""
    checks = InputChecks(next(model.parameters()).device)
    B, L = checks.ids(input_ids, "input_ids", model.spec.data["vocab_size"])
    checks.keep_mask(attention_mask, "attention_mask", B, "input_ids")
    if attention_mask is not None and attention_mask.shape[1] != L:
        raise ValueError(
            f"attention_mask must have the shape of input_ids {(B, L)}, "
            f"got {tuple(attention_mask.shape)}"
        )
    checks.run()
    limit = model.decoder.position.position_limit()
    if seq2seq:
        last = max_new_tokens  # the decoder start token sits at position 0
    elif attention_mask is not None and attention_mask.device.type != "meta":
        last = int(attention_mask.ne(0).sum(-1).max()) + max_new_tokens - 1  # left padding
    else:
        last = L + max_new_tokens - 1
    if limit is not None and last >= limit:
        position = model.decoder.position.name
        raise ValueError(
            f"max_new_tokens={max_new_tokens} with a {L}-token prompt needs {last + 1} "
            f"positions, more than {model.spec.name}'s max_len {limit} (position {position!r} "
            "has no vector past it)"
        )
    rows = B * num_beams
    length = (1 if seq2seq else L) + max_new_tokens
    need = 8 * rows * length * (TOKEN_BUFFERS if num_beams > 1 else 1)
    if use_cache:
        per_token = kv_cache_values(model.decoder, length)
        if per_token is not None:
            ref = next(model.parameters())
            need += int(per_token * length * rows * ref.element_size())
            need += rows * sum(state_bytes(model.decoder, ref.element_size()))
    check_fits(
        need,
        input_ids.device,
        f"generating max_new_tokens={max_new_tokens} for {rows} rows (KV cache and token buffers)",
        "ask for fewer tokens, beams or rows",
    )


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _real(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _token(name: str, value: Any, vocab: int, *, many: bool = False) -> None:
    """None, a token id in [0, vocab), or (when `many`) a list of them."""
    values = value if many and isinstance(value, (list, tuple)) else [value]
    for v in values:
        if v is not None and not (_integer(v) and 0 <= v < vocab):
            raise ValueError(f"{name} must be a token id in [0, {vocab}), got {v!r}")


def check_arguments(vocab: int, **args: Any) -> None:
    """Types and ranges of generate's keyword arguments (`vocab`: the logits' size)."""
    max_new, min_new = args["max_new_tokens"], args["min_new_tokens"]
    if not _integer(max_new) or max_new < 1:
        raise ValueError(f"max_new_tokens must be a positive integer, got {max_new!r}")
    if not _integer(min_new) or not 0 <= min_new <= max_new:
        raise ValueError(
            f"min_new_tokens must be an integer in [0, max_new_tokens={max_new}], got {min_new!r}"
        )
    temperature, top_k, top_p = args["temperature"], args["top_k"], args["top_p"]
    if not _real(temperature) or temperature <= 0:
        raise ValueError(f"temperature must be a finite number > 0, got {temperature!r}")
    if args["do_sample"] is True and temperature < MIN_TEMPERATURE:
        raise ValueError(
            f"temperature={temperature!r} is below {MIN_TEMPERATURE} with do_sample=True: "
            "scores / temperature would overflow to inf and NaN; for the most likely token "
            "at each step, use do_sample=False"
        )
    if top_k is not None and (not _integer(top_k) or top_k < 0):
        raise ValueError(f"top_k must be an integer >= 0, got {top_k!r}")
    if top_p is not None and (not _real(top_p) or not 0.0 < top_p <= 1.0):
        raise ValueError(f"top_p must be in (0, 1], got {top_p!r}")
    if not _integer(args["num_beams"]) or args["num_beams"] < 1:
        raise ValueError(f"num_beams must be an integer >= 1, got {args['num_beams']!r}")
    penalty = args["length_penalty"]
    if not _real(penalty):
        raise ValueError(f"length_penalty must be a finite number, got {penalty!r}")
    if _integer(args["num_beams"]) and args["num_beams"] > 1 and max_new > 1:
        bound = LOG_FLOAT32_RANGE / math.log(max_new)  # length ** penalty, lengths 1..max_new
        if abs(penalty) > bound:
            raise ValueError(
                f"length_penalty={penalty!r} is out of range for max_new_tokens={max_new}: "
                "beam scores are divided by length ** length_penalty, which must stay a "
                f"finite, non-zero float32; |length_penalty| <= {bound:.4g} here"
            )
    if args["early_stopping"] not in (True, False, "never"):
        raise ValueError(
            f"early_stopping must be True, False or 'never', got {args['early_stopping']!r}"
        )
    for name in ("do_sample", "use_cache"):
        if not isinstance(args[name], bool) and not (name == "use_cache" and args[name] is None):
            raise ValueError(f"{name} must be True or False, got {args[name]!r}")
    _token("eos_token_id", args["eos_token_id"], vocab, many=True)
    for name in ("pad_token_id", "decoder_start_token_id", "forced_eos_token_id"):
        _token(name, args[name], vocab)
    if args["generator"] is not None and not isinstance(args["generator"], torch.Generator):
        raise ValueError(
            f"generator must be a torch.Generator, got {type(args['generator']).__name__}"
        )
    if args["on_token"] is not None and not callable(args["on_token"]):
        raise ValueError(f"on_token must be callable, got {type(args['on_token']).__name__}")
    if args["on_token"] is not None and args["num_beams"] > 1:  # transformers' streamer rule
        raise ValueError(
            f"on_token cannot be used with beam search (num_beams={args['num_beams']}): beams are "
            "reordered, so a step has no final tokens to report; set num_beams=1 or drop on_token"
        )
