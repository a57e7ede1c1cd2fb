"""Routing for mixtures of experts: top-k choice, grouped expert matmuls, load-balancing loss."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

GROUPED_MM_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def route(
    logits: Tensor,
    top_k: int,
    order: str,
    normalize: bool,
    *,
    groups: Groups | None = None,
    choice_bias: Tensor | None = None,
    scale: float = 1.0,
) -> tuple[Tensor, Tensor]:
    """Routing weights (N, k) in fp32 and expert indices (N, k) from router logits (N, E).

    `sigmoid` scores each expert independently (DeepSeek-V3) and chooses by those scores;
    `sigmoid_logits` weighs by the same scores but chooses by the raw logits (Kolibri-1);
    `choice_bias` (E,) is added to what chooses only, `groups` limits the choice to the best
    groups, and `scale` multiplies the final weights.
    """
    if order == "topk_softmax":  # softmax over the k best logits only (sums to 1 already)
        top, experts = logits.topk(top_k, dim=-1)
        return top.float().softmax(dim=-1) * scale, experts
    sigmoid = order in ("sigmoid", "sigmoid_logits")
    scores = logits.float().sigmoid() if sigmoid else logits.float().softmax(dim=-1)
    choice = logits.float() if order == "sigmoid_logits" else scores
    if choice_bias is not None:
        choice = choice + choice_bias.float()
    if groups is not None:
        choice = groups.restrict(choice)
    experts = choice.topk(top_k, dim=-1).indices
    weights = scores.gather(1, experts)
    if normalize:  # DeepSeek adds 1e-20 to the sum of sigmoid scores
        eps = 1e-20 if order == "sigmoid" else 0.0
        weights = weights / (weights.sum(dim=-1, keepdim=True) + eps)
    return weights * scale, experts


@dataclass(frozen=True)
class Groups:
    """Group-limited routing (DeepSeek): experts in `n` equal groups; a group scores the sum
    of its `top` best expert scores and a token chooses only among its `keep` best groups."""

    n: int
    keep: int
    top: int = 2

    def restrict(self, choice: Tensor) -> Tensor:
        """Choice scores (N, E) with the experts of the groups not kept at -inf."""
        N, E = choice.shape
        grouped = choice.view(N, self.n, E // self.n)  # (N, G, E/G)
        group_scores = grouped.topk(self.top, dim=-1).values.sum(dim=-1)  # (N, G)
        kept = group_scores.topk(self.keep, dim=-1).indices  # (N, keep)
        keep = torch.zeros_like(group_scores, dtype=torch.bool).scatter(1, kept, True)
        return grouped.masked_fill(~keep[..., None], float("-inf")).view(N, E)


def expert_matmul(x: Tensor, w: Tensor, ends: Tensor) -> Tensor:
    """Rows of x (M, K) sorted by expert, times that expert's w (E, K, N) -> (M, N).

    ends (E,) int32: cumulative row counts. One grouped matmul where torch has one for the
    dtype; otherwise one matmul per expert (never one per token).
    """
    if x.dtype in GROUPED_MM_DTYPES and x.device.type in ("cpu", "cuda"):
        return torch._grouped_mm(x, w, offs=ends)
    out = x.new_empty(x.shape[0], w.shape[-1])
    start = 0
    for e, end in enumerate(ends.tolist()):
        out[start:end] = x[start:end] @ w[e]
        start = end
    return out


def load_balancing_loss(
    logits: list[Tensor], n_experts: int, top_k: int, attention_mask: Tensor | None
) -> Tensor:
    """Switch Transformer's loss, E * sum_e f_e * P_e, pooled over every routing call.

    f_e: share of (token, slot) assignments that go to expert e (top-k of the softmax);
    P_e: mean router probability of e. Padding tokens (attention_mask 0) are left out; each
    call's logits are (N, E) with N = batch x length, as transformers' Mixtral computes it.
    """
    device = logits[0].device
    counts = torch.zeros(n_experts, dtype=torch.float32, device=device)
    prob_sum = torch.zeros(n_experts, dtype=torch.float32, device=device)
    rows = torch.zeros((), dtype=torch.float32, device=device)
    for layer in logits:
        probs = layer.float().softmax(dim=-1)  # (N, E)
        chosen = probs.topk(top_k, dim=-1).indices.reshape(-1)  # (N k,)
        if attention_mask is None or attention_mask.numel() != layer.shape[0]:
            keep = torch.ones(layer.shape[0], dtype=torch.float32, device=device)
        else:
            keep = attention_mask.reshape(-1).to(device=device, dtype=torch.float32)
        counts = counts.index_add(0, chosen, keep.repeat_interleave(top_k))
        prob_sum = prob_sum + (probs * keep[:, None]).sum(dim=0)
        rows = rows + keep.sum()
    return n_experts * torch.sum((counts / rows) * (prob_sum / rows))


class LoadBalanced:
    """The aux-loss contract of a routed component (moe ffn, moa attention) whose forward
    appends its router logits to `self.routing`: one Switch/Mixtral load-balancing loss per
    pool of layers routing over as many experts and top-k (transformers' JetMoE pools its
    attention and MLP routers)."""

    @classmethod
    def combine_aux_loss(cls, modules: list, attention_mask: Tensor | None) -> tuple[Tensor, float]:
        """The loss over every routing call of `modules` (one pool) in this forward."""
        logits = [t for m in modules for t in m.routing]
        first = modules[0].cfg
        loss = load_balancing_loss(logits, first.n_experts, first.top_k, attention_mask)
        return loss, first.aux_loss_coef

    def aux_loss_pool(self) -> tuple[str, int, int]:
        return ("load_balancing", self.cfg.n_experts, self.cfg.top_k)

    def reset_aux_loss(self) -> None:
        self.routing = []
