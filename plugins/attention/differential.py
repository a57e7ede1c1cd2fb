"""Differential attention (Ye et al., 2024, "Differential Transformer"), as DiffLlama runs it.

Query head i < H/2 and query head i + H/2 form a pair: two softmax maps A1, A2 over the same
keys, whose difference weighs a value twice a head wide, [v_j | v_{j + Hkv/2}] (j the kv
head of query head i). Each pair gives (A1 - lambda * A2) V, RMS-normed over its 2 * hd
features (no weights) and scaled by (1 - lambda_init); the H/2 pairs then go through the
output projection. lambda = exp(lq1 . lk1) - exp(lq2 . lk2) + lambda_init, with learned
(hd,) vectors and lambda_init = 0.8 - 0.6 * exp(-0.3 * l) at block index l by default.
The q, k, v and output projections are `mha`'s (projections.py); the template rotates,
caches k and v as they are and runs the layer's kernel on the doubled values.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from archzoo.parts.attention_template import AttentionTemplate
from archzoo.parts.component import param
from archzoo.parts.interfaces import AttentionContext, NormFactory

from .projections import ProjectionConfig, Projections, projection_issues


def depth_lambda_init(layer_index: int) -> float:
    """The paper's lambda_init for block index l (from 0): 0.8 - 0.6 * exp(-0.3 * l)."""
    return 0.8 - 0.6 * math.exp(-0.3 * layer_index)


class DifferentialAttention(Projections, AttentionTemplate, name="diff_mha", kv_cache=True):
    """differential attention: pairs of softmax maps subtracted with a learned lambda (DiffLlama)"""

    class Config(ProjectionConfig):
        lambda_init: float | None = param(
            None,
            "the fixed part of lambda and the output scale (1 - lambda_init) "
            "(null: 0.8 - 0.6 * exp(-0.3 * l) at block index l, the paper's schedule by depth)",
        )
        lambda_std: float = param(0.1, "std of the lambda vectors' normal initialisation", min=0.0)
        pair_norm_eps: float = param(1e-5, "epsilon of the RMS norm over each pair's 2 x head_dim")

    def __init__(
        self,
        cfg: Any,
        dims: Any,
        *,
        make_norm: NormFactory | None = None,
        layer_index: int = 0,
    ) -> None:
        super().__init__(cfg, dims)
        self.build_projections(cfg, dims, cross=False, make_norm=make_norm)
        hd = dims.head_dim
        self.lambda_init = (
            depth_lambda_init(layer_index) if cfg.lambda_init is None else cfg.lambda_init
        )
        self.lambda_q1, self.lambda_k1 = (
            nn.Parameter(torch.zeros(hd)),
            nn.Parameter(torch.zeros(hd)),
        )
        self.lambda_q2, self.lambda_k2 = (
            nn.Parameter(torch.zeros(hd)),
            nn.Parameter(torch.zeros(hd)),
        )

    @classmethod
    def check(cls, cfg: Any, dims: Any) -> list[tuple[str, str]]:
        issues = projection_issues(cfg, dims)
        n_kv = cfg.n_kv_heads or dims.n_heads
        if not issues and n_kv % 2:
            issues.append(
                ("n_kv_heads", f"{n_kv} key/value heads: differential pairs need an even count")
            )
        return issues

    def init_weights(self, std: float) -> None:
        """The lambda vectors ~ N(0, lambda_std) (the projections: the model's init)."""
        for p in (self.lambda_q1, self.lambda_k1, self.lambda_q2, self.lambda_k2):
            nn.init.normal_(p, std=self.cfg.lambda_std)

    def attend(
        self, x: Tensor, ctx: AttentionContext, memory: Tensor | None = None
    ) -> tuple[Tensor, Tensor | None]:
        q, k, v = self.project(x, ctx, memory)  # v (B, Hkv, Tk, hd), cached as it is
        half = self.n_kv // 2
        pair = torch.cat([v[:, :half], v[:, half:]], dim=-1)  # (B, Hkv/2, Tk, 2 hd)
        return self.attend_qkv(x, q, k, pair.repeat(1, 2, 1, 1), ctx, memory)  # (B, Hkv, Tk, 2 hd)

    def lambda_full(self, dtype: torch.dtype) -> Tensor:
        """exp(lq1 . lk1) - exp(lq2 . lk2) + lambda_init, the products summed in float32."""
        one = torch.exp(torch.sum(self.lambda_q1 * self.lambda_k1, dim=-1, dtype=torch.float32))
        two = torch.exp(torch.sum(self.lambda_q2 * self.lambda_k2, dim=-1, dtype=torch.float32))
        return one.to(dtype) - two.to(dtype) + self.lambda_init

    def merge_heads(self, out: Tensor) -> Tensor:
        """(B, H, Tq, 2 hd) -> pairs (A1 - lambda A2) V, normed and scaled -> (B, Tq, d_model)."""
        B, H, Tq, wide = out.shape
        first, second = out.transpose(1, 2).chunk(2, dim=2)  # each (B, Tq, H/2, 2 hd)
        pairs = first - self.lambda_full(out.dtype) * second
        pairs = (1 - self.lambda_init) * F.rms_norm(pairs, (wide,), eps=self.cfg.pair_norm_eps)
        return self.out(pairs.reshape(B, Tq, H // 2 * wide))  # (B, Tq, H * hd)
