"""What a model costs per token: forward FLOPs, KV-cache bytes and active parameters.

Conventions (those of MFU accounting, Kaplan et al. 2020 / PaLM appendix B):

- `flops_per_token` is one token's forward pass at a context of `context` tokens: 2 FLOPs
  per weight of every projection (each `nn.Linear` a component holds, the LM head
  included even when tied), plus the attention core, 2 FLOPs per key and per query channel
  for the score product and 2 more for the value product. A token of a causal stack sees
  the keys of the last position of the context (every key for dense attention, a window
  for local attention); a token of a bidirectional stack the mean keys per query.
  Norms, activations, softmax and embedding lookups are not counted.
- `kv_cache_bytes_per_token` is the self-attention cache at `context` tokens divided by
  `context`, per dtype: a layer caching every key counts its full width, a windowed layer
  `min(window, context) / context` of it, a latent attention its latent width; a recurrent
  mixer caches no tokens: `state_bytes_per_row` gives each decoder layer's state (a
  convolution window and an SSM or delta-rule state) for one row, 0 for attention layers.
- `params_active` is reported when an FFN says a token uses fewer parameters than it has
  (a mixture of experts, through `FeedForward.active_parameters`).
"""

from __future__ import annotations

import math
from typing import Any

BYTES_PER_VALUE: dict[str, int] = {"float32": 4, "bfloat16": 2, "int8": 1}


def stack_flops(stack: Any, context: int, *, memory_len: int | None = None) -> int:
    """Forward FLOPs of one token through a stack (embedding, every layer use, final norm)."""
    flops = stack.embedding.matmul_flops() + stack.position.matmul_flops()
    for i in stack.layer_map:  # a shared block costs FLOPs every time it is used
        block = stack.blocks[i]
        flops += block.matmul_flops()
        flops += block.attention.attention_flops(context, causal=stack.causal)
        if block.cross_attention is not None:
            keys = memory_len if memory_len is not None else context
            flops += block.cross_attention.attention_flops(keys, causal=False)
    return int(flops)


def kv_cache_values(stack: Any, context: int) -> float | None:
    """Cached numbers per token of a decoding stack at `context`; None if it cannot cache."""
    total = 0.0
    for i in stack.layer_map:
        if not stack.blocks[i].attention.capabilities.kv_cache:
            return None
        for attention in cached_mixers(stack.blocks[i].attention):
            if attention.state_shapes() is not None:  # a recurrent state: state_bytes
                continue
            width, window = attention.cache_width()
            kept = context if window is None else min(window, context)
            total += width * kept / context
    return total


def cached_mixers(attention: Any) -> list[Any]:
    """The mixers of a layer that keep a cache: the layer itself, or its side-by-side parts."""
    parts = attention.cache_parts()
    return [m for p in parts for m in cached_mixers(p)] if parts else [attention]


def state_bytes(stack: Any, value_size: int) -> list[int]:
    """Bytes of each layer's recurrent decoding state for one row (0 for a layer that caches
    keys and values), with `value_size` bytes per value of the model's own dtype."""
    out = []
    for i in stack.layer_map:
        total = 0
        for attention in cached_mixers(stack.blocks[i].attention):
            for shape, dtype in (attention.state_shapes() or {}).values():
                size = value_size if dtype is None else dtype.itemsize
                total += math.prod(shape) * size
        out.append(total)
    return out


def active_parameters(model: Any) -> int | None:
    """Parameters one token uses, when some FFN is a mixture of experts; else None."""
    seen: set[int] = set()
    saved = 0
    moe = False
    for stack in (model.encoder, model.decoder):
        if stack is None:
            continue
        for block in stack.blocks:
            if id(block.ffn) in seen:
                continue
            seen.add(id(block.ffn))
            active = block.ffn.active_parameters()
            if active is not None:
                moe = True
                saved += sum(p.numel() for p in block.ffn.parameters()) - active
    return model.num_parameters() - saved if moe else None


def _number(x: float) -> int | float:
    return int(x) if float(x).is_integer() else round(x, 3)


def model_costs(model: Any, context: int | None = None) -> dict[str, Any]:
    """flops_per_token (total and per stack), kv_cache_bytes_per_token and params_active."""
    spec = model.spec
    context = spec.data["max_len"] if context is None else context
    if not isinstance(context, int) or isinstance(context, bool) or context < 1:
        raise ValueError(f"context must be a positive number of tokens, got {context!r}")
    by_stack: dict[str, int] = {}
    for which in spec.stacks():
        stack = getattr(model, which)
        by_stack[which] = stack_flops(stack, context, memory_len=context)
    head = model.head.matmul_flops()
    by_stack[spec.stacks()[-1]] += head
    out: dict[str, Any] = {
        "context": context,
        "flops_per_token": sum(by_stack.values()),
        "flops_per_token_by_stack": by_stack,
        "kv_cache_bytes_per_token": None,
        "state_bytes_per_row": None,
    }
    if model.decoder is not None:
        values = kv_cache_values(model.decoder, context)
        if values is not None:
            out["kv_cache_bytes_per_token"] = {
                dtype: _number(values * size) for dtype, size in BYTES_PER_VALUE.items()
            }
        size = next(model.parameters()).element_size()
        states = state_bytes(model.decoder, size)
        if any(states):  # a hybrid stack: each layer's state per row, next to the KV bytes
            out["state_bytes_per_row"] = {"decoder": states}
    active = active_parameters(model)
    if active is not None:
        out["params_active"] = active
    return out
