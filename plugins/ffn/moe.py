"""Mixture of experts (Shazeer et al., 2017; Switch, Mixtral, Qwen-MoE): a router sends each token
to its top-k experts, whose outputs are summed with the routing weights; optional shared experts
see every token. Tokens are grouped by expert and run through one grouped matmul per projection.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import Any, Literal

import torch
from torch import Tensor, nn

from archzoo.parts.component import param
from archzoo.parts.interfaces import FeedForward, NormFactory
from archzoo.parts.linear import Float32Linear, KeepsFloat32

from .activations import ACTIVATIONS, clamped_swiglu
from .glu import GATES
from .routing import Groups, LoadBalanced, expert_matmul, route
from .sparsemixer import sparsemixer

CLAMPED = "swiglu_clamped"  # GPT-OSS's gated unit (glu_alpha, glu_limit)


class MoEFeedForward(LoadBalanced, KeepsFloat32, FeedForward, name="moe", aux_loss=True):
    """mixture of experts: top-k routed GLU/MLP experts (+ shared experts), grouped matmuls"""

    class Config:
        n_experts: int = param(8, "routed experts", min=1, max=4096)
        top_k: int = param(2, "experts per token", min=1, max=4096)
        d_expert: int | None = param(None, "hidden size of one expert (null: d_ff)", min=1)
        expert: Literal["glu", "mlp"] = param("glu", "expert kind: gated (glu) or plain (mlp)")
        activation: str = param(
            "swiglu",
            "glu: swiglu/geglu/geglu_tanh/geglu_new/reglu/swiglu_clamped; "
            "mlp: relu/gelu/gelu_tanh/gelu_new/silu",
        )
        glu_alpha: float = param(
            1.702, "swiglu_clamped: gain in g * sigmoid(alpha * g) (GPT-OSS)", gt=0.0
        )
        glu_limit: float = param(
            7.0, "swiglu_clamped: gate clamped above, up to [-limit, limit], then up + 1", gt=0.0
        )
        router_bias: bool = param(False, "a bias on the router logits (GPT-OSS)")
        expert_bias: bool = param(False, "biases on both projections of every expert (GPT-OSS)")
        output_bias: bool = param(
            False, "one d_model bias added after the routed experts' weighted sum (JetMoE)"
        )
        router: Literal[
            "softmax_topk", "topk_softmax", "sigmoid", "sigmoid_logits", "sparsemixer"
        ] = param(
            "softmax_topk",
            "softmax over all experts then top-k, top-k logits then softmax, top-k of "
            "per-expert sigmoid scores (DeepSeek-V3), top-k of the raw logits weighed by their "
            "sigmoid (choice_bias added to the logits: Kolibri-1), or SparseMixer's two picks "
            "(PhiMoE)",
        )
        mixer_eps: float = param(
            0.01,
            "sparsemixer: scores within this relative gap (x 2) of the best share its softmax",
            gt=0.0,
        )
        normalize: bool = param(True, "renormalise the top-k weights to sum to 1")
        weigh: Literal["outputs", "inputs"] = param(
            "outputs",
            "what a routing weight multiplies: its expert's output, w * expert(x) (Mixtral), "
            "or its input, expert(w * x) (Llama 4)",
        )
        fp32_weights: bool = param(
            False,
            "weigh expert outputs by the fp32 routing weights and round only their sum "
            "(Mixtral); false: weights rounded to the activations' dtype first (Qwen-MoE)",
        )
        router_fp32: bool = param(
            False,
            "router weights (and choice bias) kept in fp32 at any model dtype, logits in fp32 "
            "(DeepSeek-V3: transformers keeps its gate in fp32)",
        )
        routed_scale: float = param(
            1.0, "multiplies the routed experts' weights (DeepSeek routed_scaling_factor)", gt=0.0
        )
        choice_bias: bool = param(
            False,
            "a per-expert bias (buffer) added to the scores only to choose experts "
            "(DeepSeek-V3 e_score_correction_bias)",
        )
        n_groups: int = param(1, "expert groups for group-limited routing (DeepSeek)", min=1)
        topk_groups: int | None = param(
            None, "groups a token may choose from (null: all n_groups)", min=1
        )
        group_top: int = param(
            2, "a group's score: the sum of its group_top best expert scores", min=1
        )
        n_shared: int = param(0, "shared experts every token passes through", min=0, max=64)
        d_shared: int | None = param(
            None, "hidden size of the shared expert (null: d_expert x n_shared)", min=1
        )
        shared_gate: bool = param(False, "scale the shared expert by sigmoid(w . x) (Qwen2-MoE)")
        shared_combine: Literal["sum", "mean"] = param(
            "sum",
            "how the shared experts' output joins the routed sum: added, or averaged with it, "
            "(routed + shared) / 2 (Cohere 2 MoE's 'average')",
        )
        output_norm: bool = param(
            False,
            "normalise the block's output (routed plus shared experts) with the spec's norm "
            "(A.X-K1's post_mlp_layernorm)",
        )
        capacity: int | None = param(
            None,
            "each expert takes at most this many token slots (where: capacity_over); later "
            "ones are dropped, their routed output 0 (Switch's, NLLB-MoE's expert_capacity); "
            "null: no limit",
            min=1,
        )
        capacity_over: Literal["row", "batch"] = param(
            "row",
            "where capacity counts: each row's tokens in order, top_k 1 (Switch); or the "
            "call's tokens, every token's first choice placed before any second choice, the "
            "kept weights renormalised when `normalize` (NLLB-MoE, fairseq's Top2Gate)",
        )
        eval_capacity_fraction: float | None = param(
            None,
            "capacity_over batch, at eval: capacity = ceil(fraction x the call's tokens) "
            "(NLLB-MoE's moe_eval_capacity_token_fraction); null: capacity at eval too",
            gt=0.0,
        )
        output_dropout: float = param(
            0.0,
            "each routed expert's weighted output: dropout p in training, times (1 - p) at "
            "eval (NLLB-MoE's moe_token_dropout)",
            min=0.0,
            lt=1.0,
        )
        jitter: float = param(
            0.0, "training only: multiply inputs by U(1 - j, 1 + j)", min=0.0, lt=1.0
        )
        aux_loss_coef: float = param(
            0.01, "weight of the load-balancing loss added to `loss`", min=0.0
        )

    def __init__(self, cfg: Any, dims: Any, *, make_norm: NormFactory | None = None) -> None:
        super().__init__(cfg, dims)
        d, f, e = dims.d_model, cfg.d_expert or dims.d_ff, cfg.n_experts
        self.d_expert = f
        gated = cfg.expert == "glu"
        self.router = (Float32Linear if cfg.router_fp32 else nn.Linear)(d, e, bias=cfg.router_bias)
        # expert weights in x @ W layout: w_in (E, D, 2F as [gate | up] or F), w_out (E, F, D)
        self.w_in = nn.Parameter(torch.empty(e, d, 2 * f if gated else f))
        self.w_out = nn.Parameter(torch.empty(e, f, d))
        self.b_in = self.b_out = None
        if cfg.expert_bias:  # b_in (E, 2F | F), b_out (E, D)
            self.b_in = nn.Parameter(torch.zeros(e, 2 * f if gated else f))
            self.b_out = nn.Parameter(torch.zeros(e, d))
        self.out_bias = nn.Parameter(torch.zeros(d)) if cfg.output_bias else None  # (D,)
        self.activate = expert_activation(cfg)
        self.shared = None
        self.shared_gate = None
        if cfg.n_shared:
            d_shared = cfg.d_shared or f * cfg.n_shared
            self.shared = SharedExpert(d, d_shared, self.activate, gated)
            if cfg.shared_gate:
                self.shared_gate = nn.Linear(d, 1, bias=False)
        if cfg.choice_bias:  # trained by an update rule outside autograd, so a buffer
            self.register_buffer("score_bias", torch.zeros(e))
            self.float32_names = ("score_bias",) if cfg.router_fp32 else ()
        self.groups = None
        if cfg.n_groups > 1:
            keep = cfg.topk_groups or cfg.n_groups
            self.groups = Groups(cfg.n_groups, keep, min(cfg.group_top, e // cfg.n_groups))
        self.routing: list[Tensor] = []  # this forward's router logits, per call (aux loss)
        self.out_norm = None
        if cfg.output_norm:
            if make_norm is None:
                raise ValueError("output_norm needs the spec's norm factory (make_norm)")
            self.out_norm = make_norm(d)

    @classmethod
    def check(cls, cfg: Any, dims: Any) -> list[tuple[str, str]]:
        problems = []
        if cfg.top_k > cfg.n_experts:
            problems.append(("top_k", f"top_k {cfg.top_k} exceeds n_experts {cfg.n_experts}"))
        allowed = (
            (*GATES, CLAMPED)
            if cfg.expert == "glu"
            else ("relu", "gelu", "gelu_tanh", "gelu_new", "silu")
        )
        if cfg.activation not in allowed:
            problems.append(
                (
                    "activation",
                    f"a {cfg.expert} expert takes one of {sorted(allowed)}, got {cfg.activation!r}",
                )
            )
        if cfg.router == "sparsemixer" and (cfg.top_k != 2 or cfg.n_groups > 1 or cfg.choice_bias):
            problems.append(("router", "sparsemixer picks top_k 2, without groups or choice_bias"))
        if cfg.capacity is not None and cfg.top_k != 1 and cfg.capacity_over == "row":
            problems.append(
                (
                    "capacity",
                    f"a row's expert capacity is counted for top_k 1, not {cfg.top_k} "
                    "(capacity_over: batch counts any top_k)",
                )
            )
        if cfg.eval_capacity_fraction is not None and cfg.capacity_over != "batch":
            problems.append(("eval_capacity_fraction", "needs capacity_over: batch"))
        if cfg.shared_gate and not cfg.n_shared:
            problems.append(("shared_gate", "needs n_shared >= 1"))
        if cfg.shared_combine != "sum" and not cfg.n_shared:
            problems.append(("shared_combine", "needs n_shared >= 1"))
        if cfg.n_experts % cfg.n_groups:
            problems.append(
                ("n_groups", f"n_experts {cfg.n_experts} is not divisible by {cfg.n_groups}")
            )
        elif cfg.topk_groups is not None:
            per_group = cfg.n_experts // cfg.n_groups
            if cfg.topk_groups > cfg.n_groups:
                problems.append(
                    ("topk_groups", f"{cfg.topk_groups} exceeds n_groups {cfg.n_groups}")
                )
            elif cfg.top_k > cfg.topk_groups * per_group:
                problems.append(
                    (
                        "top_k",
                        f"top_k {cfg.top_k} exceeds the {cfg.topk_groups * per_group} experts "
                        f"of topk_groups {cfg.topk_groups} groups",
                    )
                )
        return problems

    def init_weights(self, std: float) -> None:
        for p in (self.router.weight, self.w_in, self.w_out):
            nn.init.normal_(p, std=std)
        for p in (self.router.bias, self.b_in, self.b_out, self.out_bias):
            if p is not None:
                nn.init.zeros_(p)
        if self.cfg.choice_bias:
            nn.init.zeros_(self.score_bias)
        for module in (self.shared, self.shared_gate):
            if module is not None:
                for p in module.parameters():
                    nn.init.normal_(p, std=std)

    def active_parameters(self) -> int:
        """Router, top_k experts and the shared expert: what one token multiplies."""
        routed = ("w_in", "w_out", "b_in", "b_out")  # stacked over experts
        experts = sum(p.numel() for n, p in self.named_parameters() if n in routed)
        rest = sum(p.numel() for n, p in self.named_parameters() if n not in routed)
        return rest + self.cfg.top_k * experts // self.cfg.n_experts

    def matmul_flops(self) -> int:
        return 2 * self.active_parameters()

    def forward(self, x: Tensor) -> Tensor:
        B, T, D = x.shape
        if self.training and self.cfg.jitter > 0:
            x = x * torch.empty_like(x).uniform_(1.0 - self.cfg.jitter, 1.0 + self.cfg.jitter)
        h = x.reshape(B * T, D)  # (N, D)
        logits = self.router(h)  # (N, E)
        self.routing.append(logits)
        cfg = self.cfg
        if cfg.router == "sparsemixer":
            weights, experts = sparsemixer(logits, cfg.mixer_eps, self.training)
        else:
            weights, experts = route(
                logits,
                cfg.top_k,
                cfg.router,
                cfg.normalize and cfg.capacity_over == "row",  # batch: after the drops
                groups=self.groups,
                choice_bias=self.score_bias if cfg.choice_bias else None,
                scale=cfg.routed_scale,
            )
        if cfg.capacity_over == "batch":
            weights = self.batch_capacity(weights, experts)
        elif cfg.capacity is not None:
            weights = weights * within_capacity(experts.view(B, T), cfg.n_experts, cfg.capacity)
        out = self.experts(h, weights if cfg.fp32_weights else weights.to(h.dtype), experts)
        if self.out_bias is not None:
            out = out + self.out_bias
        if self.shared is not None:
            shared = self.shared(h)
            if self.shared_gate is not None:
                shared = torch.sigmoid(self.shared_gate(h)) * shared
            out = (out + shared) / 2 if cfg.shared_combine == "mean" else out + shared
        if self.out_norm is not None:
            out = self.out_norm(out)
        return out.reshape(B, T, D)

    def experts(self, h: Tensor, weights: Tensor, experts: Tensor) -> Tensor:
        """Sum over each token's k experts of weight * expert(h) (or expert(weight * h) when
        `weigh` is inputs): h (N, D), weights/experts (N, k).
        The weighted outputs (in the weights' dtype) are summed slot by slot with a float
        accumulator and rounded to h's dtype once, as transformers' grouped_mm experts do."""
        if torch.compiler.is_compiling() and h.dtype != torch.bfloat16:
            return self.dense_experts(h, weights, experts)
        N, k = experts.shape
        flat = experts.reshape(-1)  # (N k,) expert of each (token, slot)
        order = flat.argsort(stable=True)  # slots grouped by expert
        token = order // k  # (N k,) the token each sorted slot reads
        counts = torch.zeros(self.cfg.n_experts, dtype=torch.int32, device=h.device)
        counts = counts.index_add(0, flat, torch.ones_like(flat, dtype=torch.int32))
        ends = counts.cumsum(0, dtype=torch.int32)  # (E,) end of each expert's rows
        rows = h[token]  # (N k, D) each sorted slot's token
        inputs = self.cfg.weigh == "inputs"
        if inputs:  # expert(w * x): the weight scales the token before its expert
            rows = (rows * weights.reshape(-1)[order, None]).to(h.dtype)
        a = expert_matmul(rows, self.w_in, ends)  # (N k, 2F | F)
        if self.b_in is not None:
            a = a + self.b_in[flat[order]]  # each sorted slot's expert bias
        y = expert_matmul(self.activate(a), self.w_out, ends)  # (N k, D)
        if self.b_out is not None:
            y = y + self.b_out[flat[order]]
        if not inputs:
            y = y * weights.reshape(-1)[order, None]  # (N k, D)
        y = self.drop_outputs(y)
        slots = torch.empty_like(y).index_copy(0, order, y)  # back in (token, slot) order
        return slots.view(N, k, -1).sum(dim=1).to(h.dtype)  # (N, D)

    def batch_capacity(self, weights: Tensor, experts: Tensor) -> Tensor:
        """capacity_over batch: weights (N, k) of the dropped slots zeroed, then (normalize)
        the kept ones renormalised to sum to 1 per token (all dropped: 0)."""
        cfg = self.cfg
        capacity = cfg.capacity
        if not self.training and cfg.eval_capacity_fraction is not None:
            capacity = math.ceil(cfg.eval_capacity_fraction * experts.shape[0])
        if capacity is not None:
            weights = weights * within_batch_capacity(experts, cfg.n_experts, capacity)
        if cfg.normalize:
            total = weights.sum(dim=-1, keepdim=True)
            weights = weights / total.clamp(min=torch.finfo(weights.dtype).eps)
        return weights

    def drop_outputs(self, y: Tensor) -> Tensor:
        """output_dropout on expert outputs: dropout in training, times 1 - p at eval (on a
        weighted or an unweighted output alike: the weight is a per-row factor)."""
        p = self.cfg.output_dropout
        if p == 0.0:
            return y
        return nn.functional.dropout(y, p) if self.training else y * (1.0 - p)

    def dense_experts(self, h: Tensor, weights: Tensor, experts: Tensor) -> Tensor:
        """Every expert on every token, weighted by a dense (N, E) routing matrix: the same sum
        with static shapes, for compiled graphs where torch's grouped matmul needs bf16."""
        dense = torch.zeros(h.shape[0], self.cfg.n_experts, dtype=h.dtype, device=h.device)
        dense = dense.scatter(1, experts, weights.to(h.dtype))  # (N, E)
        if self.cfg.weigh == "inputs":  # expert e sees w_e * x (0 where not chosen)
            hs = (dense.t()[:, :, None] * h[None]).to(h.dtype)  # (E, N, D)
            a = torch.einsum("end,edf->enf", hs, self.w_in)  # (E, N, 2F | F)
        else:
            a = torch.einsum("nd,edf->enf", h, self.w_in)  # (E, N, 2F | F)
        if self.b_in is not None:
            a = a + self.b_in[:, None]
        y = torch.bmm(self.activate(a), self.w_out)  # (E, N, D)
        if self.b_out is not None:
            y = y + self.b_out[:, None]
        y = self.drop_outputs(y)
        if self.cfg.weigh == "inputs":  # the chosen experts' outputs, unweighted
            chosen = torch.zeros_like(dense).scatter(1, experts, 1.0)  # (N, E)
            return torch.einsum("end,ne->nd", y, chosen)
        return torch.einsum("end,ne->nd", y, dense)


def within_capacity(experts: Tensor, n_experts: int, capacity: int) -> Tensor:
    """(B, T) top-1 expert of each token -> (B * T, 1): 1 where the token is among the first
    `capacity` of its row sent to that expert, else 0 (Switch drops the rest)."""
    onehot = nn.functional.one_hot(experts, n_experts)  # (B, T, E)
    rank = (onehot.cumsum(dim=1) * onehot).sum(-1)  # (B, T): 1 for an expert's first token
    return (rank <= capacity).reshape(-1, 1)


def within_batch_capacity(experts: Tensor, n_experts: int, capacity: int) -> Tensor:
    """(N, k) experts of each token's k slots -> (N, k): 1 where the slot is among the first
    `capacity` an expert receives, counting every token's slot 0 (in token order) before any
    slot 1, and so on (fairseq's Top2Gate: second choices queue behind all first choices)."""
    onehot = nn.functional.one_hot(experts, n_experts)  # (N, k, E)
    before = onehot.sum(dim=0).cumsum(dim=0) - onehot.sum(dim=0)  # (k, E): earlier slots' load
    place = onehot.cumsum(dim=0) - 1 + before  # (N, k, E): 0-based place in its expert's queue
    return ((place * onehot).sum(-1) < capacity).to(torch.float32)


def expert_activation(cfg: Any) -> Callable[[Tensor], Tensor]:
    """An expert's hidden activation: (.., 2F as [gate | up]) -> (.., F) for GLU experts,
    (.., F) -> (.., F) for MLP ones."""
    if cfg.expert != "glu":
        return ACTIVATIONS[cfg.activation]
    if cfg.activation == CLAMPED:
        unit = partial(clamped_swiglu, alpha=cfg.glu_alpha, limit=cfg.glu_limit)
    else:
        unit = partial(_gated, act=ACTIVATIONS[GATES[cfg.activation]])
    return partial(_split_gate_up, unit=unit)


def _gated(gate: Tensor, up: Tensor, *, act: Callable[[Tensor], Tensor]) -> Tensor:
    return act(gate) * up


def _split_gate_up(a: Tensor, *, unit: Callable[[Tensor, Tensor], Tensor]) -> Tensor:
    gate, up = a.chunk(2, dim=-1)
    return unit(gate, up)


class SharedExpert(nn.Module):
    """The dense expert every token passes through: GLU (gate|up fused) or MLP, no biases."""

    def __init__(self, d: int, f: int, activate: Callable[[Tensor], Tensor], gated: bool) -> None:
        super().__init__()
        self.up = nn.Linear(d, 2 * f if gated else f, bias=False)  # [gate | up] when gated
        self.down = nn.Linear(f, d, bias=False)
        self.activate = activate

    def forward(self, h: Tensor) -> Tensor:
        return self.down(self.activate(self.up(h)))
