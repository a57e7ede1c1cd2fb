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
# logits per chunk at most (64 MiB in fp32; GPT-2's 4 x 256 batch: 4 chunks of 256 rows).
# The chunk is freed before the backward pass, which is where a step's memory peaks; chunks
# of 79 rows (1 << 22) made GPT-2 small's whole optimizer step 1.14x slower on a CPU.
CHUNK_ELEMENTS = 1 << 24


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
    rows = chunk_rows or _chunk_rows(hidden.numel() // hidden.shape[-1], weight.shape[0])
    flat = hidden.reshape(-1, hidden.shape[-1])  # (N, E)
    target = labels.reshape(-1).to(hidden.device)  # (N,)
    grads = torch.is_grad_enabled()  # under no_grad, compute the loss only
    return _LinearCrossEntropy.apply(
        flat, weight, bias, target, rows, label_smoothing, grads, num_items
    )


def _chunk_rows(n: int, vocab: int) -> int:
    """Rows per chunk: at most CHUNK_ELEMENTS logits, in chunks of equal size (1024 rows of
    GPT-2's vocabulary: 4 chunks of 256, not 3 of 333 and one of 25)."""
    most = max(1, CHUNK_ELEMENTS // vocab)
    return -(-n // -(-n // most)) if n else most


def _full_grad(grad: Tensor | None, like: Tensor) -> Tensor:
    """The accumulated gradient in the parameter's dtype; zeros when there were no rows."""
    return torch.zeros_like(like) if grad is None else grad.to(like.dtype)


def _chunk_logits(
    weight: Tensor, h: Tensor, column: Tensor | None, buffers: list[Tensor]
) -> Tensor:
    """(V, C) fp32 logits weight @ h.T (+ bias column), written into buffers that the first
    (largest) chunk allocates and the later ones reuse: a (V, C) buffer above glibc's mmap
    threshold (32 MiB) is otherwise mapped and page-faulted afresh for every chunk."""
    vocab, c = weight.shape[0], h.shape[0]
    if not buffers:
        buffers.append(torch.empty(vocab * c, dtype=weight.dtype, device=weight.device))
        if weight.dtype != torch.float32:
            buffers.append(torch.empty(vocab * c, dtype=torch.float32, device=weight.device))
    out = buffers[0][: vocab * c].view(vocab, c)
    if column is None:
        torch.mm(weight, h.t(), out=out)
    else:
        torch.addmm(column, weight, h.t(), out=out)
    return out if len(buffers) == 1 else buffers[1][: vocab * c].view(vocab, c).copy_(out)


class _LinearCrossEntropy(torch.autograd.Function):
    """Mean CE of (N, E) @ (V, E).T logits (or sum / num_items), chunk by chunk; gradients
    made in forward.

    Each chunk's logits are made transposed, (V, C) = weight @ h.T: with the vocabulary as
    rows, all three matmuls read the (V, E) weight and write the (V, E) gradient in their
    stored layout (the (C, V) product h @ weight.T ran about 1.3x slower on a CPU), and the
    softmax reduces over dim 0.
    """

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
        # the weight gradient is accumulated in fp32 (a low-precision sum over chunks drifts);
        # the first chunk writes it (no zero-filled (V, E) buffer)
        grad_w = grad_b = None
        grad_h = torch.empty_like(hidden) if needs_h else None
        total = torch.zeros((), dtype=torch.float32, device=hidden.device)
        column = None if bias is None else bias[:, None]  # (V, 1)
        buffers: list[Tensor] = []  # the chunks' logits, reused by every chunk
        for start in range(0, hidden.shape[0], rows):
            h = hidden[start : start + rows]  # (C, E)
            t = target[start : start + rows].clamp(min=0)[None, :]  # (1, C)
            keep = valid[start : start + rows]
            logits = _chunk_logits(weight, h, column, buffers)  # (V, C) fp32
            picked = logits.gather(0, t)[0]  # (C,)
            mean = logits.mean(dim=0) if smoothing else None
            # log-sum-exp and softmax in place: no second (V, C) buffer (torch.logsumexp
            # would make one for exp(logits - max))
            top = logits.amax(dim=0)  # (C,)
            probs = logits.sub_(top).exp_()  # unnormalised, in place: (V, C)
            sums = probs.sum(dim=0)
            lse = top + sums.log()
            row_loss = (1.0 - smoothing) * (lse - picked)
            if smoothing:
                row_loss = row_loss + smoothing * (lse - mean)
            total += row_loss.masked_fill(~keep, 0.0).sum()
            if not (needs_h or needs_w or needs_b):
                continue
            s = scale[start : start + rows]  # (C,): 0 on ignored rows
            grad = probs.mul_(s / sums)  # softmax x scale, in place: (V, C)
            if smoothing:
                grad.sub_(s * (smoothing / vocab))
            grad.scatter_add_(0, t, (s * (smoothing - 1.0))[None, :])
            if needs_h:
                torch.mm(grad.to(weight.dtype).t(), weight, out=grad_h[start : start + rows])
            if needs_w:
                if grad_w is None:
                    grad_w = torch.mm(grad, h.float())  # (V, E)
                else:
                    grad_w.addmm_(grad, h.float())
            if needs_b:
                grad_b = grad.sum(1) if grad_b is None else grad_b.add_(grad.sum(1))
        ctx.grads = (
            grad_h,
            _full_grad(grad_w, weight) if needs_w else None,
            _full_grad(grad_b, bias) if needs_b else None,
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
