"""FlexAttention under an `AttentionMask`'s BlockMask: compiled on CUDA, eager elsewhere."""

from __future__ import annotations

import functools
from typing import Any

import torch
from torch import Tensor

from archzoo.parts.kernels import Scoring, attention_kernel
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


def sink_correction(out: Tensor, lse: Tensor, sinks: Tensor) -> Tensor:
    """A plain attention output (B, H, Tq, hd) and its logsumexp (B, H, Tq), sinks (H,) ->
    the output with the sink in the denominator (a row with no key, L = -inf, gives 0)."""
    share = torch.sigmoid(lse.float() - sinks.float().view(1, -1, 1))  # Z / (Z + e^sink)
    return out * share.to(out.dtype)[..., None]


@functools.lru_cache(maxsize=64)
def softcap_score_mod(cap: float) -> Any:
    """FlexAttention's score_mod(score, b, h, q_idx, kv_idx) capping the scaled score (one
    function per cap, so a compiled kernel is reused)."""

    def score_mod(score: Tensor, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        return torch.tanh(score / cap) * cap

    return score_mod


def flex_refuses(q: Tensor, k: Tensor, mask: AttentionMask, scoring: Scoring) -> str | None:
    """FlexAttention takes the mask as a BlockMask and a soft-cap as a score_mod; sinks come in
    through its logsumexp, which only CUDA returns."""
    if _flex_attention is None:
        return "this torch has no FlexAttention"
    if scoring.bias is not None:
        return "a score bias tensor"
    if scoring.dropout:
        return "dropout"
    if scoring.needs_probs:
        return "a position term on the values needs the probabilities"
    if scoring.global_qkv is not None:
        return "separate global projections: the blocked kernel"
    if scoring.sinks is not None and q.device.type != "cuda":
        return "sinks need FlexAttention's logsumexp, returned on CUDA only"
    return None


@attention_kernel("flex", refuses=flex_refuses)
def flex(
    q: Tensor, k: Tensor, v: Tensor, mask: AttentionMask, scoring: Scoring
) -> tuple[Tensor, None]:
    """FlexAttention under the mask's BlockMask (compiled on CUDA), soft-cap as a score_mod"""
    score_mod = None if scoring.softcap is None else softcap_score_mod(scoring.softcap)
    if scoring.sinks is None:
        out = mask_flex(q, k, v, mask, scale=scoring.scale, score_mod=score_mod)
    else:
        out, lse = mask_flex(
            q, k, v, mask, scale=scoring.scale, return_lse=True, score_mod=score_mod
        )
        out = sink_correction(out, lse, scoring.sinks)
    # a pattern's rows come back zero where no key is allowed, and its dense mask is O(n^2)
    return (out if mask.pattern is not None else mask.zero_empty_rows(out)), None
