"""FlexAttention under an `AttentionMask`'s BlockMask: compiled on CUDA, eager elsewhere."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from archzoo.parts.masks import AttentionMask

try:  # FlexAttention is optional: CPU eager never depends on it
    from torch.nn.attention.flex_attention import flex_attention as _flex_attention
except ImportError:  # pragma: no cover - old torch
    _flex_attention = None
try:  # how newer torch asks for the logsumexp (return_lse before it)
    from torch.nn.attention.flex_attention import AuxRequest
except ImportError:  # pragma: no cover - older torch
    AuxRequest = None

_compiled_flex: Any = None


def flex_available() -> bool:
    """Whether this torch has FlexAttention."""
    return _flex_attention is not None


def mask_flex(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: AttentionMask,
    *,
    scale: float | None,
    return_lse: bool = False,
    score_mod: Any = None,
) -> Any:
    """FlexAttention under the mask's BlockMask (made once per forward): (B, H, Tq, hd), and
    with `return_lse` also the logsumexp (B, H, Tq) of each query's scaled scores;
    `score_mod` changes the scaled scores first (soft-capping)."""
    global _compiled_flex
    if _flex_attention is None:
        raise RuntimeError("FlexAttention is not available in this version of torch")
    run = _flex_attention
    if not torch.compiler.is_compiling() and q.device.type == "cuda":
        if _compiled_flex is None:
            _compiled_flex = torch.compile(_flex_attention, dynamic=False)
        run = _compiled_flex
    block_mask = mask.block_mask(batch=q.shape[0])
    kwargs = {"block_mask": block_mask, "scale": scale, "enable_gqa": q.shape[1] != k.shape[1]}
    if score_mod is not None:
        kwargs["score_mod"] = score_mod
    if not return_lse:
        return run(q, k, v, **kwargs)
    if AuxRequest is None:
        return run(q, k, v, return_lse=True, **kwargs)
    out, aux = run(q, k, v, return_aux=AuxRequest(lse=True), **kwargs)
    return out, aux.lse
