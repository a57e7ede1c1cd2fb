"""Mixture of attention heads (Zhang et al., 2022, "MoA"), as JetMoE runs it.

A router (top-k logits, softmax over those k) picks k of E experts per token; expert e owns a
query projection (d_model -> Hkv * hd) and an output projection (Hkv * hd -> d_model). Keys
and values come from one shared projection (Hkv heads), so slot s of a token has Hkv query
heads that all attend with the shared keys and values: n_heads = top_k * n_kv_heads. Each
slot's heads go through its expert's output projection, weighted by its routing weight and
summed, plus one d_model bias. The template rotates q and k, caches k and v once per token
and runs the layer's kernel; the router's logits join the moe ffn's in one load-balancing
loss (`aux_loss_pool`).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from archzoo.parts.attention_template import AttentionTemplate
from archzoo.parts.component import param
from archzoo.parts.interfaces import AttentionContext

from ..ffn.routing import LoadBalanced, expert_matmul, route


class MixtureOfHeads(LoadBalanced, AttentionTemplate, name="moa", kv_cache=True, aux_loss=True):
    """mixture of attention heads: top-k experts with own q/out projections, shared k/v (JetMoE)"""

    class Config:
        n_experts: int = param(8, "attention experts (query + output projection pairs)", min=1)
        top_k: int = param(2, "experts per token; n_heads = top_k x n_kv_heads", min=1)
        n_kv_heads: int | None = param(
            None, "key/value heads, shared by every expert (null: n_heads / top_k)", min=1
        )
        out_bias: bool = param(True, "one d_model bias added after the experts' weighted sum")
        scale: float | None = param(None, "score scale (null: 1/sqrt(head_dim))", gt=0.0)
        aux_loss_coef: float = param(
            0.01, "weight of the load-balancing loss added to `loss`", min=0.0
        )

    def __init__(self, cfg: Any, dims: Any) -> None:
        super().__init__(cfg, dims)
        d, e, hd = dims.d_model, cfg.n_experts, dims.head_dim
        self.n_heads, self.head_dim, self.top_k = dims.n_heads, hd, cfg.top_k
        self.n_kv = cfg.n_kv_heads or dims.n_heads // cfg.top_k
        width = self.n_kv * hd  # one expert's queries: Hkv heads
        self.router = nn.Linear(d, e, bias=False)
        self.kv = nn.Linear(d, 2 * width, bias=False)  # [k | v]
        # expert weights in x @ W layout: w_q (E, D, Hkv hd), w_out (E, Hkv hd, D)
        self.w_q = nn.Parameter(torch.empty(e, d, width))
        self.w_out = nn.Parameter(torch.empty(e, width, d))
        self.out_bias = nn.Parameter(torch.zeros(d)) if cfg.out_bias else None
        self.routing: list[Tensor] = []  # this forward's router logits (aux loss)

    @classmethod
    def check(cls, cfg: Any, dims: Any) -> list[tuple[str, str]]:
        if cfg.top_k > cfg.n_experts:
            return [("top_k", f"top_k {cfg.top_k} exceeds n_experts {cfg.n_experts}")]
        n_kv = cfg.n_kv_heads or dims.n_heads // cfg.top_k
        if n_kv * cfg.top_k != dims.n_heads:
            problem = (
                f"n_heads {dims.n_heads} must equal top_k {cfg.top_k} x n_kv_heads "
                f"({cfg.n_kv_heads if cfg.n_kv_heads else 'null: n_heads / top_k'})"
            )
            return [("n_kv_heads", problem)]
        return []

    def init_weights(self, std: float) -> None:
        for p in (self.router.weight, self.kv.weight, self.w_q, self.w_out):
            nn.init.normal_(p, std=std)
        if self.out_bias is not None:
            nn.init.zeros_(self.out_bias)

    def cache_layout(self) -> tuple[int, int, int | None]:
        return self.n_kv, self.head_dim, None

    def scoring_terms(self) -> dict[str, Any]:
        return {"scale": self.cfg.scale}

    def project_kv(self, src: Tensor) -> tuple[Tensor, Tensor]:
        """The shared k and v (B, Hkv, T, hd)."""
        B, T, _ = src.shape
        kv = self.kv(src).view(B, T, 2, self.n_kv, self.head_dim)  # [k | v], Hkv heads each
        return kv[:, :, 0].transpose(1, 2), kv[:, :, 1].transpose(1, 2)

    def attend(
        self, x: Tensor, ctx: AttentionContext, memory: Tensor | None = None
    ) -> tuple[Tensor, Tensor | None]:
        B, T, D = x.shape
        k_, hkv, hd = self.top_k, self.n_kv, self.head_dim
        h = x.reshape(B * T, D)  # (N, D)
        logits = self.router(h)  # (N, E)
        self.routing.append(logits)
        weights, experts = route(logits.float(), k_, "topk_softmax", True)  # (N, k) each
        q = by_expert(h.repeat_interleave(k_, dim=0), experts, self.w_q)  # (N k, Hkv hd)
        # slots then kv heads -> kv heads then slots: query head j * k + s reads kv head j
        q = q.view(B, T, k_, hkv, hd).permute(0, 3, 2, 1, 4).reshape(B, hkv * k_, T, hd)
        k, v = self.project_kv(x)
        if ctx.position is not None and self.uses_position:
            q, k = ctx.position.rotate(ctx.position_state, q, k)
        if ctx.cache is not None:
            k, v = ctx.cache.append(k, v)
        out, probs = self.run_kernel(q, k, v, ctx.mask, self.make_scoring(q, k, ctx))
        # (B, Hkv k, T, hd) -> (N k, Hkv hd): each token's slots, a slot's heads together
        out = out.view(B, hkv, k_, T, hd).permute(0, 3, 2, 1, 4).reshape(B * T * k_, hkv * hd)
        y = by_expert(out, experts, self.w_out).view(B * T, k_, D)  # (N, k, D)
        y = (y * weights.to(y.dtype)[..., None]).sum(dim=1)  # (N, D)
        if self.out_bias is not None:
            y = y + self.out_bias
        if probs is not None:  # heads back in slot-major order: head s * Hkv + j
            probs = probs.unflatten(1, (hkv, k_)).transpose(1, 2).flatten(1, 2)
        return y.view(B, T, D), probs


def by_expert(rows: Tensor, experts: Tensor, w: Tensor) -> Tensor:
    """rows (N k, Din) in (token, slot) order, each times its slot's expert weight
    w[experts] (E, Din, Dout) -> (N k, Dout), one grouped matmul over rows sorted by expert."""
    flat = experts.reshape(-1)  # (N k,)
    order = flat.argsort(stable=True)
    counts = torch.zeros(w.shape[0], dtype=torch.int32, device=rows.device)
    ends = counts.index_add(0, flat, torch.ones_like(flat, dtype=torch.int32)).cumsum(
        0, dtype=torch.int32
    )
    y = expert_matmul(rows[order], w, ends)  # sorted by expert
    return torch.empty_like(y).index_copy(0, order, y)
