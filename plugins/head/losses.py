"""Cross-entropy with HF conventions: ignore index -100, optional next-token shift.

`linear_cross_entropy` fuses the vocabulary projection with the loss, a chunk of rows at a
time, so a training step never holds (tokens x vocab) logits, log-probabilities or their
gradients: each chunk's gradient is folded into the hidden-state and weight gradients
during the forward pass (the three matmuls of the plain path, none recomputed).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

IGNORE_INDEX = -100
CHUNK_ELEMENTS = 1 << 22  # logits per chunk (16 MiB in fp32)


def shift_labels(labels: Tensor) -> Tensor:
    """Position t is scored against label t+1; the last position is ignored."""
    return F.pad(labels[:, 1:], (0, 1), value=IGNORE_INDEX)


def token_cross_entropy(logits: Tensor, labels: Tensor, *, shift: bool) -> Tensor:
    """Mean CE over tokens whose label is not -100; with shift, position t predicts t+1."""
    if shift:  # shift the labels, not the logits: slicing (B, T, V) logits would copy them
        labels = shift_labels(labels)
    return F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]).float(),  # (B*T, V)
        labels.reshape(-1).to(logits.device),
        ignore_index=IGNORE_INDEX,
    )


def linear_cross_entropy(
    hidden: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    labels: Tensor,
    *,
    shift: bool,
    label_smoothing: float = 0.0,
    chunk_rows: int | None = None,
    num_items: float | Tensor | None = None,
) -> Tensor:
    """token_cross_entropy(hidden @ weight.T + bias, labels) without materialising the logits.

    hidden (..., E), weight (V, E), bias (V,) or None, labels (...). The logits are computed
    in hidden's dtype and the softmax in fp32, as on the plain path. `num_items`: the loss is
    the sum over scored tokens divided by it (gradient accumulation), not their mean.
    """
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"label_smoothing must be in [0, 1], got {label_smoothing}")
    if labels.shape != hidden.shape[:-1]:
        raise ValueError(
            f"labels of shape {tuple(labels.shape)} do not match the hidden states' "
            f"{tuple(hidden.shape[:-1])}"
        )
    if shift:
        labels = shift_labels(labels)
    rows = chunk_rows or max(1, CHUNK_ELEMENTS // weight.shape[0])
    flat = hidden.reshape(-1, hidden.shape[-1])  # (N, E)
    target = labels.reshape(-1).to(hidden.device)  # (N,)
    grads = torch.is_grad_enabled()  # under no_grad, compute the loss only
    return _LinearCrossEntropy.apply(
        flat, weight, bias, target, rows, label_smoothing, grads, num_items
    )


class _LinearCrossEntropy(torch.autograd.Function):
    """Mean CE of (N, E) @ (V, E).T logits (or sum / num_items), chunk by chunk; gradients
    made in forward."""

    @staticmethod
    def forward(
        ctx: Any,
        hidden: Tensor,
        weight: Tensor,
        bias: Tensor | None,
        target: Tensor,
        rows: int,
        smoothing: float,
        grads: bool,
        num_items: float | Tensor | None,
    ) -> Tensor:
        needs_h, needs_w, needs_b = (grads and n for n in ctx.needs_input_grad[:3])
        vocab = weight.shape[0]
        valid = target != IGNORE_INDEX  # (N,)
        count = valid.sum() if num_items is None else num_items
        # one scale per valid row: d(loss)/d(row loss); 1/0 never happens where it is used
        scale = valid.float() / (count.clamp(min=1) if num_items is None else num_items)
        # accumulate the weight gradient in fp32 (a low-precision sum over chunks drifts)
        f32 = {"dtype": torch.float32, "device": weight.device}
        grad_w = torch.zeros(weight.shape, **f32) if needs_w else None
        grad_h = torch.empty_like(hidden) if needs_h else None
        grad_b = torch.zeros(vocab, **f32) if needs_b else None
        total = torch.zeros((), dtype=torch.float32, device=hidden.device)
        for start in range(0, hidden.shape[0], rows):
            h = hidden[start : start + rows]  # (C, E)
            t = target[start : start + rows]
            keep = valid[start : start + rows]
            logits = F.linear(h, weight, bias).float()  # (C, V)
            picked = logits.gather(1, t.clamp(min=0)[:, None])[:, 0]
            mean = logits.mean(dim=-1) if smoothing else None
            # log-sum-exp and softmax in place: no second (C, V) buffer (torch.logsumexp
            # would make one for exp(logits - max))
            top = logits.amax(dim=-1)  # (C,)
            probs = logits.sub_(top[:, None]).exp_()  # unnormalised, in place: (C, V)
            sums = probs.sum(dim=-1)
            lse = top + sums.log()
            row_loss = (1.0 - smoothing) * (lse - picked)
            if smoothing:
                row_loss = row_loss + smoothing * (lse - mean)
            total += row_loss.masked_fill(~keep, 0.0).sum()
            if not (needs_h or needs_w or needs_b):
                continue
            grad = probs.div_(sums[:, None])  # softmax, in place: (C, V)
            if smoothing:
                grad.sub_(smoothing / vocab)
            grad.scatter_add_(
                1, t.clamp(min=0)[:, None], torch.full_like(lse, smoothing - 1.0)[:, None]
            )
            grad.mul_(scale[start : start + rows, None])  # ignored rows -> 0
            g = grad.to(weight.dtype)
            if needs_h:
                torch.mm(g, weight, out=grad_h[start : start + rows])
            if needs_w:
                grad_w.addmm_(grad.t(), h.float())  # (V, E)
            if needs_b:
                grad_b += grad.sum(0)
        ctx.grads = (
            grad_h,
            grad_w.to(weight.dtype) if needs_w else None,
            grad_b.to(bias.dtype) if needs_b else None,
        )
        return total / count  # mean: nan when every label is ignored, as F.cross_entropy

    @staticmethod
    def backward(ctx: Any, grad_out: Tensor) -> tuple[Tensor | None, ...]:
        if torch.is_grad_enabled():  # create_graph=True: second-order terms are not kept
            raise RuntimeError(
                "the chunked LM loss has first-order gradients only; use return_logits=True "
                "to differentiate through the loss twice"
            )
        if ctx.grads is None:
            raise RuntimeError(
                "the chunked LM loss keeps its gradients for one backward pass only "
                "(use return_logits=True to backpropagate through the loss twice)"
            )
        grads, ctx.grads = ctx.grads, None  # hand the buffers over: autograd may keep them
        scaled = [None if g is None else g.mul_(grad_out.to(g.dtype)) for g in grads]
        return (*scaled, None, None, None, None, None)
