"""What `generate` refuses before any work: bad prompts or masks, positions the decoder cannot
encode, and caches or buffers larger than the device's free memory."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torch import Tensor

from .costs import kv_cache_values
from .input_checks import InputChecks
from .memory import check_fits

if TYPE_CHECKING:
    from .model import ZooModel

TOKEN_BUFFERS = 6  # int64 (rows, length) buffers beam search keeps (running, finished, candidates)


def check_generation(
    model: ZooModel,
    input_ids: Tensor,
    attention_mask: Tensor | None,
    *,
    max_new_tokens: int,
    num_beams: int,
    use_cache: bool,
    seq2seq: bool,
) -> None:
    """Raise ValueError (naming the argument) for a request that cannot run."""
    checks = InputChecks()
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
    check_fits(
        need,
        input_ids.device,
        f"generating max_new_tokens={max_new_tokens} for {rows} rows (KV cache and token buffers)",
        "ask for fewer tokens, beams or rows",
    )
