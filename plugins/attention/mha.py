"""Multi-head attention (Vaswani et al., 2017) with MQA/GQA, through SDPA."""

from __future__ import annotations

from dataclasses import fields, replace
from functools import partial
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from archzoo.parts.component import param
from archzoo.parts.interfaces import Attention, AttentionContext, NormFactory
from archzoo.parts.linear import make_linear

from .eager import eager_attention, takes_eager
from .flex import flex_available, mask_flex
from .sinks import flex_lse_available, flex_with_sinks, sink_attention
from .softcap import capped_probs, softcap_score_mod


class MultiHeadAttention(Attention, name="mha", cross=True, kv_cache=True, mup=True):
    """dense multi-head attention (n_kv_heads for MQA/GQA) via scaled_dot_product_attention"""

    class Config:
        n_kv_heads: int | None = param(
            None, "key/value heads (null: n_heads; 1: MQA)", min=1, null="n_heads"
        )
        fused_qkv: bool = param(True, "one projection for q, k and v (k and v for cross)")
        bias: bool = param(True, "biases on the q/k/v projections")
        out_bias: bool | None = param(
            None, "bias on the output projection (null: as bias)", null="bias"
        )
        bias_apart: bool = param(
            False, "add the projections' biases after the matmul, x @ W.T + b (Falcon's rounding)"
        )
        scale: float | None = param(None, "score scale (null: 1/sqrt(head_dim))", gt=0.0)
        scale_query: bool = param(
            False,
            "multiply q by the scale right after its projection, rounded in q's dtype, and "
            "attend with scale 1 (OPT: transformers' order, bit-equal in bf16)",
        )
        use_position: bool = param(
            True, "apply the stack's position rotation/bias here (false: a NoPE layer, SmolLM3)"
        )
        qk_norm: Literal["none", "head", "each_head", "full"] = param(
            "none",
            "normalise q and k with the spec's norm: per head (Qwen3), per head with weights "
            "of its own (StableLM) or whole (OLMo 2)",
        )
        qk_norm_bias: bool = param(True, "q/k norms shift too when the norm has a bias")
        clip_qkv: float | None = param(
            None, "clamp the q/k/v projections to [-clip, clip] (MPT)", gt=0.0
        )
        kv_broadcast: bool = param(
            False,
            "one key/value head reaches SDPA as is, broadcast over the query heads (Falcon's "
            "multi-query call: another kernel, other bits), not through enable_gqa",
        )
        sinks: bool = param(
            False, "a learned logit per head in every softmax denominator, no value (GPT-OSS)"
        )
        softcap: float | None = param(
            None, "soft-cap scores to cap * tanh(s / cap) before the softmax (Gemma 2)", gt=0.0
        )
        eager: bool = param(
            False,
            "attend op by op in the activations' dtype as transformers' eager attention: "
            "q @ k^T * scale, + bias, masked, softmax (sinks: max subtracted first), @ v "
            "(GPT-1, MPT, XLM, BigBird, LongT5, GPT-OSS: their bf16 bits; 16-bit floats only, "
            "wider ones keep SDPA); false: SDPA",
        )
        fused_bias: bool = param(
            False, "eager: bias + scale * q @ k^T in one baddbmm, rounded once (BLOOM)"
        )

    def __init__(
        self, cfg: Any, dims: Any, *, cross: bool = False, make_norm: NormFactory | None = None
    ) -> None:
        super().__init__(cfg, dims)
        self.cross = cross
        self.n_heads = dims.n_heads
        self.n_kv = cfg.n_kv_heads or dims.n_heads
        self.head_dim = dims.head_dim
        d, q_dim, kv_dim = dims.d_model, dims.n_heads * dims.head_dim, self.n_kv * dims.head_dim
        self.q_dim, self.kv_dim = q_dim, kv_dim
        linear = partial(make_linear, bias=cfg.bias, bias_apart=cfg.bias_apart)
        if cfg.fused_qkv and not cross:
            self.qkv = linear(d, q_dim + 2 * kv_dim)
        elif cfg.fused_qkv:
            self.q = linear(d, q_dim)
            self.kv = linear(d, 2 * kv_dim)
        else:
            self.q, self.k, self.v = linear(d, q_dim), linear(d, kv_dim), linear(d, kv_dim)
        out_bias = cfg.bias if cfg.out_bias is None else cfg.out_bias
        self.out = linear(q_dim, d, bias=out_bias)
        self.dropout = dims.attention_dropout
        self.scale = cfg.scale
        if cfg.scale is None and dims.score_exponent != 0.5:  # muP: 1 / head_dim
            self.scale = dims.head_dim**-dims.score_exponent
        self.query_scale = None  # set: q is scaled on projection and scores are not
        if cfg.scale_query:
            self.query_scale = self.scale if self.scale is not None else dims.head_dim**-0.5
            self.scale = 1.0
        self.q_norm = self.k_norm = None
        if cfg.qk_norm != "none" and not cross:
            if make_norm is None:
                raise ValueError("qk_norm needs the spec's norm factory (make_norm)")
            options = {} if cfg.qk_norm_bias else {"bias": False}
            if cfg.qk_norm == "full":
                self.q_norm, self.k_norm = make_norm(q_dim, **options), make_norm(kv_dim, **options)
            elif cfg.qk_norm == "head":
                self.q_norm = make_norm(dims.head_dim, **options)
                self.k_norm = make_norm(dims.head_dim, **options)
            else:  # each_head: weights (H, hd), a row per head
                self.q_norm = make_norm(dims.head_dim, heads=self.n_heads, **options)
                self.k_norm = make_norm(dims.head_dim, heads=self.n_kv, **options)
        self.sinks = nn.Parameter(torch.zeros(dims.n_heads)) if cfg.sinks else None  # (H,)
        self._broadcast_kv = cfg.kv_broadcast and self.n_kv == 1

    @classmethod
    def check(cls, cfg: Any, dims: Any) -> list[tuple[str, str]]:
        issues = []
        if cfg.n_kv_heads is not None and dims.n_heads % cfg.n_kv_heads:
            issues.append(
                (
                    "n_kv_heads",
                    f"n_heads {dims.n_heads} is not divisible by n_kv_heads {cfg.n_kv_heads}",
                )
            )
        if cfg.eager and cfg.softcap is not None:
            issues.append(("eager", "has no soft-capping (the capped path is explicit already)"))
        if cfg.fused_bias and not cfg.eager:
            issues.append(("fused_bias", "is eager attention's baddbmm: set eager: true too"))
        return issues

    @classmethod
    def cross_attention(cls, cfg: Any, dims: Any, **parts: Any) -> Attention:
        """Dense `mha` with this layer's projection settings (also for sparse subclasses)."""
        own = {f.name: getattr(cfg, f.name) for f in fields(MultiHeadAttention.Config)}
        make_norm = parts.get("make_norm")
        return MultiHeadAttention(
            MultiHeadAttention.Config(**own), dims, cross=True, make_norm=make_norm
        )

    def cache_layout(self) -> tuple[int, int, int | None]:
        return self.n_kv, self.head_dim, None

    def project_kv(self, src: Tensor) -> tuple[Tensor, Tensor]:
        """k and v (B, Hkv, Tk, hd) of a source sequence (cross-attention memory)."""
        if hasattr(self, "kv"):
            k, v = self.kv(src).split([self.kv_dim, self.kv_dim], dim=-1)
        else:
            k, v = self.k(src), self.v(src)
        return self._heads(k, self.n_kv), self._heads(v, self.n_kv)

    def _clip(self, t: Tensor) -> Tensor:
        clip = self.cfg.clip_qkv
        return t if clip is None else t.clamp(-clip, clip)

    def _scale_query(self, q: Tensor) -> Tensor:
        return q if self.query_scale is None else q * self.query_scale

    def _heads(self, t: Tensor, n: int) -> Tensor:
        B, T, _ = t.shape
        return t.view(B, T, n, self.head_dim).transpose(1, 2)  # (B, n, T, hd)

    def project(
        self, x: Tensor, ctx: AttentionContext, memory: Tensor | None
    ) -> tuple[Tensor, Tensor, Tensor]:
        """q (B, H, Tq, hd), k and v (B, Hkv, Tk, hd), with positions and cache applied."""
        if memory is None:
            fused = "qkv" in self._modules  # hasattr goes through Module.__getattr__
            if fused and self.cfg.qk_norm != "full":  # heads straight from the fused output
                B, T, _ = x.shape
                heads = self.n_heads + 2 * self.n_kv
                qkv = self._clip(self.qkv(x)).view(B, T, heads, self.head_dim).transpose(1, 2)
                # qkv: (B, H + 2 Hkv, T, hd); the same views as splitting features first
                q, k, v = qkv.split_with_sizes([self.n_heads, self.n_kv, self.n_kv], dim=1)
            else:
                if fused:
                    q, k, v = self._clip(self.qkv(x)).split(
                        [self.q_dim, self.kv_dim, self.kv_dim], dim=-1
                    )
                else:
                    q, k, v = self._clip(self.q(x)), self._clip(self.k(x)), self._clip(self.v(x))
                if self.cfg.qk_norm == "full":  # over all heads at once: (B, T, H*hd)
                    q, k = self.q_norm(q), self.k_norm(k)
                q, k, v = (
                    self._heads(q, self.n_heads),
                    self._heads(k, self.n_kv),
                    self._heads(v, self.n_kv),
                )
            if self.cfg.qk_norm in ("head", "each_head"):  # each head's hd features: (B, H, T, hd)
                q, k = self.q_norm(q), self.k_norm(k)
            q = self._scale_query(q)
        else:  # cross-attention: memory keys/values are computed once per generation
            q = self._scale_query(self._heads(self.q(x), self.n_heads))
            cache = ctx.cache
            if cache is not None and cache.k is not None:
                return q, cache.k, cache.v
            k, v = self.project_kv(memory)
            if cache is not None:
                cache.k, cache.v = k, v
            return q, k, v
        if ctx.position is not None:
            q, k = ctx.position.rotate(ctx.position_state, q, k)
        if ctx.cache is not None:
            k, v = ctx.cache.append(k, v)
        return q, k, v

    def forward(self, x: Tensor, ctx: AttentionContext, memory: Tensor | None = None) -> Tensor:
        B, Tq, _ = x.shape
        if not self.cfg.use_position:  # this layer sees no positions at all
            ctx = replace(ctx, position=None, position_state=None)
        q, k, v = self.project(x, ctx, memory)
        bias = None
        scale = self.scale if self.scale is not None else self.head_dim**-0.5
        if ctx.position is not None:
            bias = ctx.position.score_bias(ctx.position_state, q, k, scale)
        values = ctx.position is not None and ctx.position.capabilities.values
        if self.cfg.softcap is not None and not values and self._flex_capped(q, bias):
            cap = self.cfg.softcap
            self.record_probs(ctx, q, k, scale=scale, sinks=self.sinks, softcap=cap)
            if self.sinks is None:
                out = mask_flex(q, k, v, ctx.mask, scale=scale, score_mod=softcap_score_mod(cap))
            else:
                out = flex_with_sinks(
                    q, k, v, ctx.mask, self.sinks, scale=scale, score_mod=softcap_score_mod(cap)
                )
        elif takes_eager(self.cfg.eager, q) and not values:
            out, probs = eager_attention(
                q,
                k,
                v,
                ctx.mask.dense(),
                scale=scale,
                bias=bias,
                sinks=self.sinks,
                dropout_p=self.dropout if self.training else 0.0,
                fused_bias=self.cfg.fused_bias,
            )  # (B, H, Tq, hd)
            self.record_probs(ctx, q, k, scale=scale, probs=probs)
        elif values or self.cfg.softcap is not None:
            out = self._attend_with_probs(q, k, v, ctx, bias)
        elif self.sinks is not None:
            self.record_probs(ctx, q, k, scale=scale, bias=bias, sinks=self.sinks)
            out = sink_attention(
                q,
                k,
                v,
                ctx.mask,
                self.sinks,
                bias=bias,
                scale=self.scale,
                dropout_p=self.dropout if self.training else 0.0,
            )  # (B, H, Tq, hd)
        else:
            if ctx.want_probs:
                self.record_probs(ctx, q, k, scale=scale, bias=bias)
            out = F.scaled_dot_product_attention(
                q,
                k,
                v,
                **ctx.mask.sdpa(bias, q.dtype),
                dropout_p=self.dropout if self.training else 0.0,
                scale=self.scale,
                enable_gqa=self.n_kv != self.n_heads and not self._broadcast_kv,
            )  # (B, H, Tq, hd)
        out = ctx.mask.zero_empty_rows(out)
        out = out.transpose(1, 2).reshape(B, Tq, self.q_dim)  # (B, Tq, H*hd)
        return self.out(out)

    def _flex_capped(self, q: Tensor, bias: Tensor | None) -> bool:
        """Whether soft-capped scores go through FlexAttention (CUDA or compiled, no bias or
        dropout) rather than the explicit path."""
        fast = q.device.type == "cuda" or torch.compiler.is_compiling()
        lse = self.sinks is None or flex_lse_available(q)  # sinks need FlexAttention's logsumexp
        return (
            fast
            and lse
            and flex_available()
            and bias is None
            and not (self.training and self.dropout)
        )

    def _attend_with_probs(
        self, q: Tensor, k: Tensor, v: Tensor, ctx: AttentionContext, bias: Tensor | None
    ) -> Tensor:
        """Explicit softmax path: soft-capped scores, and positions that act on the values
        (Shaw's a^V)."""
        if self.n_kv != self.n_heads:
            k = k.repeat_interleave(self.n_heads // self.n_kv, dim=1)  # (B, H, Tk, hd)
            v = v.repeat_interleave(self.n_heads // self.n_kv, dim=1)
        scale = self.scale if self.scale is not None else self.head_dim**-0.5
        probs = capped_probs(
            q, k, ctx.mask.dense(), scale=scale, cap=self.cfg.softcap, bias=bias, sinks=self.sinks
        )  # (B, H, Tq, Tk)
        self.record_probs(ctx, q, k, scale=scale, probs=probs)
        probs = F.dropout(probs, self.dropout, self.training)
        out = probs @ v  # (B, H, Tq, hd)
        if ctx.position is not None and ctx.position.capabilities.values:
            out = out + ctx.position.value_bias(ctx.position_state, probs)
        return out
