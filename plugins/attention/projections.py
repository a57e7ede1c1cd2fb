"""The q, k, v and output projections every softmax attention shares, as options and a mixin.

`ProjectionConfig` holds the options (head counts, fusing, biases and their rounding, query
scaling, q/k norms, clamping, sinks, soft-cap); `Projections` builds the parameters on the
attention module itself (`qkv` or `q`/`kv` or `q`/`k`/`v`, `out`, `q_norm`, `k_norm`, `sinks`:
the names the converters map) and supplies the template's `project_*` steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

import torch
from torch import Tensor, nn

from archzoo.parts.component import param
from archzoo.parts.interfaces import NormFactory
from archzoo.parts.linear import make_linear


@dataclass
class ProjectionConfig:
    n_kv_heads: int | None = param(
        None, "key/value heads (null: n_heads; 1: MQA)", min=1, null="n_heads"
    )
    fused_qkv: bool = param(True, "one projection for q, k and v (k and v for cross)")
    bias: bool = param(True, "biases on the q/k/v projections")
    out_bias: bool | None = param(
        None, "bias on the output projection (null: as bias)", null="bias"
    )
    bias_add: Literal["fused", "after_matmul"] = param(
        "fused",
        "where the projections' biases are added: inside the matmul (F.linear, one rounding) "
        "or after it, x @ W.T + b, the product rounded first in 16-bit floats (Falcon)",
    )
    q_groups: int = param(
        1,
        "the q projection block-diagonal in this many groups, each group of outputs "
        "from its own inputs only (a grouped 1x1 convolution, SqueezeBERT)",
        min=1,
    )
    k_groups: int = param(1, "the k projection block-diagonal in this many groups", min=1)
    v_groups: int = param(1, "the v projection block-diagonal in this many groups", min=1)
    out_groups: int = param(1, "the output projection block-diagonal in this many groups", min=1)
    value_width: int | None = param(
        None,
        "the v projection reads a tensor of this width that the block hands over apart "
        "from x (MobileBERT's bottleneck block: its d_model-wide input, while q and k read "
        "a narrower bottleneck); null: x, as q and k",
        min=1,
    )
    scale: float | None = param(None, "score scale (null: 1/sqrt(head_dim))", gt=0.0)
    scale_at: Literal["scores", "query"] = param(
        "scores",
        "where the score scale multiplies: the scores, in the kernel, or q right after its "
        "projection, rounded in q's dtype, with the kernel's scale 1 (OPT, XLM: bit-equal "
        "in bf16)",
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
    qk_norm_scale: bool = param(
        True,
        "q/k norms learn a scale; false: none, each head's q and k divided by their root mean "
        "square only (Llama 4's L2 norm)",
    )
    qk_norm_after_position: bool = param(
        False,
        "apply the per-head q/k norm after the position's rotation, not before it (HunYuan)",
    )
    temperature_floor: int | None = param(
        None,
        "scale each query by 1 + temperature_scale * ln(1 + floor((i + temperature_offset) / "
        "temperature_floor)), i its index in the row, padding counted as transformers counts "
        "it (Llama 4's NoPE layers: floor_scale; Ministral 3: original_max_position_embeddings)"
        "; null: no scaling",
        min=1,
    )
    temperature_scale: float = param(
        0.1,
        "strength of the query temperature of temperature_floor (attn_scale, llama_4_scaling_beta)",
        gt=0.0,
    )
    temperature_offset: int = param(
        1,
        "added to the query index before the division of temperature_floor: 1 (Llama 4, "
        "(i + 1) / floor_scale) or 0 (Ministral 3, i / original_max_position_embeddings)",
        min=0,
    )
    qkv_clamp: float | None = param(
        None, "clamp the q, k and v projections to [-c, c] (MPT's clip_qkv)", gt=0.0
    )
    kv_heads_reach_kernel: Literal["grouped", "broadcast"] = param(
        "grouped",
        "how one key/value head shared by every query head reaches SDPA: grouped "
        "(enable_gqa) or as a broadcast view (Falcon's multi-query call: another kernel, "
        "other bits)",
    )
    sinks: bool = param(
        False, "a learned logit per head in every softmax denominator, no value (GPT-OSS)"
    )
    out_norm: bool = param(
        False,
        "normalise the heads' concatenated output with the spec's norm (n_heads x head_dim "
        "wide) before the output projection (BitNet's attn_sub_norm)",
    )
    softcap: float | None = param(
        None, "soft-cap scores to cap * tanh(s / cap) before the softmax (Gemma 2)", gt=0.0
    )


def projection_issues(cfg: Any, dims: Any) -> list[tuple[str, str]]:
    """Checks of the options against the model's sizes: (parameter, problem) pairs."""
    if cfg.n_kv_heads is not None and dims.n_heads % cfg.n_kv_heads:
        problem = f"n_heads {dims.n_heads} is not divisible by n_kv_heads {cfg.n_kv_heads}"
        return [("n_kv_heads", problem)]
    groups = {"q_groups": cfg.q_groups, "k_groups": cfg.k_groups, "v_groups": cfg.v_groups}
    if cfg.fused_qkv and max(groups.values()) > 1:
        grouped = next(name for name, g in groups.items() if g > 1)
        return [(grouped, "needs separate q, k and v projections (fused_qkv: false)")]
    q_dim, kv_dim = dims.n_heads * dims.head_dim, (cfg.n_kv_heads or dims.n_heads) * dims.head_dim
    sizes = {"q_groups": q_dim, "k_groups": kv_dim, "v_groups": kv_dim, "out_groups": q_dim}
    for name, g in {**groups, "out_groups": cfg.out_groups}.items():
        if dims.d_model % g or sizes[name] % g:
            problem = f"{g} groups do not divide d_model {dims.d_model} and {sizes[name]}"
            return [(name, problem)]
    if cfg.value_width is not None and cfg.fused_qkv:
        return [("value_width", "needs separate q, k and v projections (fused_qkv: false)")]
    if cfg.qk_norm_after_position and cfg.qk_norm not in ("head", "each_head"):
        problem = f"needs a per-head qk_norm ('head' or 'each_head'), not {cfg.qk_norm!r}"
        return [("qk_norm_after_position", problem)]
    return []


class Projections:
    """Mixin of an attention module: its projections, built by `build_projections`."""

    def build_projections(
        self, cfg: Any, dims: Any, *, cross: bool, make_norm: NormFactory | None
    ) -> None:
        self.cross = cross
        self.n_heads = dims.n_heads
        self.n_kv = cfg.n_kv_heads or dims.n_heads
        self.head_dim = dims.head_dim
        d, q_dim, kv_dim = dims.d_model, dims.n_heads * dims.head_dim, self.n_kv * dims.head_dim
        self.q_dim, self.kv_dim = q_dim, kv_dim
        linear = partial(make_linear, bias=cfg.bias, bias_add=cfg.bias_add)
        if cfg.fused_qkv and not cross:
            self.qkv = linear(d, q_dim + 2 * kv_dim)
        elif cfg.fused_qkv:
            self.q = linear(d, q_dim)
            self.kv = linear(d, 2 * kv_dim)
        else:
            self.q = linear(d, q_dim, groups=cfg.q_groups)
            self.k = linear(d, kv_dim, groups=cfg.k_groups)
            self.v = linear(cfg.value_width or d, kv_dim, groups=cfg.v_groups)
        out_bias = cfg.bias if cfg.out_bias is None else cfg.out_bias
        self.out = linear(q_dim, d, bias=out_bias, groups=cfg.out_groups)
        self.scale = cfg.scale
        if cfg.scale is None and dims.score_exponent != 0.5:  # muP: 1 / head_dim
            self.scale = dims.head_dim**-dims.score_exponent
        self.query_scale = None  # set: q is scaled on projection and scores are not
        if cfg.scale_at == "query":
            self.query_scale = self.scale if self.scale is not None else dims.head_dim**-0.5
            self.scale = 1.0
        self.q_norm = self.k_norm = None
        if cfg.qk_norm != "none" and not cross:
            self._build_qk_norms(cfg, dims, make_norm)
        self.sinks = nn.Parameter(torch.zeros(dims.n_heads)) if cfg.sinks else None  # (H,)
        self.uses_position = cfg.use_position
        self.out_norm = None
        if getattr(cfg, "out_norm", False) and not cross:
            if make_norm is None:
                raise ValueError("out_norm needs the spec's norm factory (make_norm)")
            self.out_norm = make_norm(q_dim)

    def _build_qk_norms(self, cfg: Any, dims: Any, make_norm: NormFactory | None) -> None:
        if make_norm is None:
            raise ValueError("qk_norm needs the spec's norm factory (make_norm)")
        options: dict[str, Any] = {} if cfg.qk_norm_bias else {"bias": False}
        if not cfg.qk_norm_scale:
            options["scale"] = False
        if cfg.qk_norm == "full":
            self.q_norm = make_norm(self.q_dim, **options)
            self.k_norm = make_norm(self.kv_dim, **options)
        elif cfg.qk_norm == "head":
            self.q_norm = make_norm(dims.head_dim, **options)
            self.k_norm = make_norm(dims.head_dim, **options)
        else:  # each_head: weights (H, hd), a row per head
            self.q_norm = make_norm(dims.head_dim, heads=self.n_heads, **options)
            self.k_norm = make_norm(dims.head_dim, heads=self.n_kv, **options)

    def scoring_terms(self) -> dict[str, Any]:
        broadcast = self.cfg.kv_heads_reach_kernel == "broadcast" and self.n_kv == 1
        return dict(
            scale=self.scale, softcap=self.cfg.softcap, sinks=self.sinks, broadcast_kv=broadcast
        )

    def cache_layout(self) -> tuple[int, int, int | None]:
        return self.n_kv, self.head_dim, None

    def _clip(self, t: Tensor) -> Tensor:
        clip = self.cfg.qkv_clamp
        return t if clip is None else t.clamp(-clip, clip)

    def _scale_query(self, q: Tensor) -> Tensor:
        return q if self.query_scale is None else q * self.query_scale

    def _heads(self, t: Tensor, n: int) -> Tensor:
        B, T, _ = t.shape
        return t.view(B, T, n, self.head_dim).transpose(1, 2)  # (B, n, T, hd)

    def project_q(self, x: Tensor) -> Tensor:
        """Cross-attention queries (B, H, Tq, hd)."""
        return self._scale_query(self._heads(self.q(x), self.n_heads))

    def project_kv(self, src: Tensor) -> tuple[Tensor, Tensor]:
        """k and v (B, Hkv, Tk, hd) of a source sequence (cross-attention memory)."""
        if hasattr(self, "kv"):
            k, v = self.kv(src).split([self.kv_dim, self.kv_dim], dim=-1)
        else:
            k, v = self.k(src), self.v(src)
        return self._heads(k, self.n_kv), self._heads(v, self.n_kv)

    def project_qkv(self, x: Tensor, values: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """q (B, H, T, hd), k and v (B, Hkv, T, hd) of the new tokens, q/k normed (unless
        the norm comes after the position: `after_position`); v of `values` (B, T,
        value_width) when the block hands them over (value_width)."""
        norm = self.cfg.qk_norm
        if (values is None) != (self.cfg.value_width is None):
            raise ValueError(
                f"attention {self.name!r}: value_width {self.cfg.value_width} needs its "
                "values' input from the block (a bottleneck block), and only then takes one"
            )
        if "qkv" in self._modules and norm != "full":  # heads straight from the fused output
            B, T, _ = x.shape
            heads = self.n_heads + 2 * self.n_kv
            qkv = self._clip(self.qkv(x)).view(B, T, heads, self.head_dim).transpose(1, 2)
            # qkv: (B, H + 2 Hkv, T, hd); the same views as splitting features first
            q, k, v = qkv.split_with_sizes([self.n_heads, self.n_kv, self.n_kv], dim=1)
        else:
            if "qkv" in self._modules:
                sizes = [self.q_dim, self.kv_dim, self.kv_dim]
                q, k, v = self._clip(self.qkv(x)).split(sizes, dim=-1)
            else:
                v_in = x if values is None else values
                q, k, v = self._clip(self.q(x)), self._clip(self.k(x)), self._clip(self.v(v_in))
            if norm == "full":  # over all heads at once: (B, T, H*hd)
                q, k = self.q_norm(q), self.k_norm(k)
            q, k = self._heads(q, self.n_heads), self._heads(k, self.n_kv)
            v = self._heads(v, self.n_kv)
        if self.cfg.qk_norm_after_position:
            return q, k, v  # normed (and q scaled) by after_position
        if norm in ("head", "each_head"):  # each head's hd features: (B, H, T, hd)
            q, k = self.q_norm(q), self.k_norm(k)
        return self._scale_query(q), k, v

    def project(self, x: Tensor, ctx: Any, memory: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
        """The template's project, position and cache steps, then the query temperature of
        `temperature_floor` (self-attention only): q (B, H, Tq, hd) scaled per query."""
        q, k, v = super().project(x, ctx, memory)  # type: ignore[misc]
        floor = self.cfg.temperature_floor
        if floor is None or memory is not None:
            return q, k, v
        i = ctx.mask.query_positions().float()  # (Tq,) index of each query in its row
        shifted = i + float(self.cfg.temperature_offset)
        scales = torch.log1p(torch.floor(shifted / floor)) * self.cfg.temperature_scale + 1.0
        return (q * scales[:, None]).to(q.dtype), k, v  # (Tq, 1) over each head's rows

    def merge_heads(self, out: Tensor) -> Tensor:
        """The kernel's heads (B, H, Tq, hd) -> (B, Tq, d_model), through `out_norm` (when
        set) and the output projection."""
        B, _, Tq, _ = out.shape
        merged = out.transpose(1, 2).reshape(B, Tq, -1)  # (B, Tq, H*hd)
        return self.out(merged if self.out_norm is None else self.out_norm(merged))

    def after_position(self, q: Tensor, k: Tensor) -> tuple[Tensor, Tensor]:
        """The template's step between the position and the cache: the per-head q/k norm
        of `qk_norm_after_position` on rotated q (B, H, T, hd) and k (B, Hkv, T, hd)."""
        if not self.cfg.qk_norm_after_position or self.q_norm is None:
            return q, k
        return self._scale_query(self.q_norm(q)), self.k_norm(k)
