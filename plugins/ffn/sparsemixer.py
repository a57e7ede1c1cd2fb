"""SparseMixer routing (Liu et al., 2024, arXiv:2409.12136; PhiMoE): two experts per token,
picked one after the other, each weighted by a softmax over only the scores close to the
best one left.

Pick j (j = 1, 2) among the scores s not yet picked: m = the best of them; the scores within
a relative gap of it, (m - s) / max(|s|, m) <= 2 eps, form a softmax; the expert is the best
one (in training, a Gumbel sample of that softmax) and its weight is its softmax share. In
training the weight's gradient is SparseMixer's estimate (a Heun third-order step: the share
times 1 when the sample is the best or with probability 1/4, else 1/3), flowing to all
scores through d share / d s, not through the sampling.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor


class _Estimate(torch.autograd.Function):
    """The picked expert's weight share * step in the forward pass; SparseMixer's gradient
    (share * grad into the picked score, minus softmax * share * grad into every score)."""

    @staticmethod
    def forward(
        ctx: Any, scores: Tensor, share: Tensor, picked: Tensor, probs: Tensor, step: Tensor
    ) -> Tensor:
        ctx.save_for_backward(share, picked, probs)
        return share * step

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:
        share, picked, probs = ctx.saved_tensors
        grad = grad * share  # (N, 1)
        into_scores = (probs * -grad).scatter_add(-1, picked, grad)  # (N, E)
        return into_scores, None, None, None, None


def _pick(
    scores: Tensor, left: Tensor, eps: float, training: bool, extra_draw: bool
) -> tuple[Tensor, Tensor]:
    """One pick among `left` (scores with those already picked at -inf): weight (N, 1) and
    expert (N, 1). The random draws come in transformers' order (same seed, same picks)."""
    with torch.no_grad():
        best, best_at = left.max(dim=-1, keepdim=True)  # (N, 1)
        far = (best - scores) / scores.abs().clamp(min=best) > 2 * eps
    kept = left.masked_fill(far, float("-inf"))  # (N, E)
    if training:  # a Gumbel-max sample of softmax(kept)
        gumbel = torch.empty_like(kept, memory_format=torch.legacy_contiguous_format)
        picked = (kept - gumbel.exponential_().log()).max(dim=-1)[1].unsqueeze(-1)
    else:
        picked = best_at
    probs = kept.softmax(dim=-1)  # (N, E)
    share = probs.gather(-1, picked)  # (N, 1)
    if not training:
        return share, picked
    top = probs.max(dim=-1, keepdim=True)
    coin = torch.rand_like(top.values)
    if extra_draw:  # transformers draws the second pick's coin twice
        coin = coin.uniform_()
    step = torch.add(0.3333, (picked == top.indices) | (coin > 0.75), alpha=0.6667)
    return _Estimate.apply(scores, share, picked, probs, step.type_as(probs)), picked


def sparsemixer(scores: Tensor, eps: float, training: bool) -> tuple[Tensor, Tensor]:
    """Weights (N, 2) and experts (N, 2) of router logits `scores` (N, E)."""
    w1, e1 = _pick(scores, scores, eps, training, extra_draw=False)
    left = scores.scatter(-1, e1, float("-inf"))  # the first pick out
    w2, e2 = _pick(scores, left, eps, training, extra_draw=True)
    return torch.cat([w1, w2], dim=-1), torch.cat([e1, e2], dim=-1)
