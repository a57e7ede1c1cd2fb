"""A post-LN block whose attention and FFNs run at a narrower width between two projections
(MobileBERT, Sun et al., 2020): an input bottleneck d_model -> inner_dim (linear + norm),
attention over it (q and k from it or from a second bottleneck of their own, v from it or
from the block's full-width input), residual + norm, n_ffn FFNs each with residual + norm,
and an output bottleneck inner_dim -> d_model added to the block's input, then normed."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, Literal

from torch import Tensor, nn

from archzoo.parts.component import param
from archzoo.parts.interfaces import AttentionContext, Block, Dims, NormFactory


class BottleneckBlock(Block, name="bottleneck", cross_layer=False):
    """post-LN with attention and stacked FFNs at a narrower width between two projections"""

    class Config:
        inner_dim: int | None = param(
            None,
            "the width the attention and FFNs run at, between a d_model -> inner_dim input "
            "bottleneck and an inner_dim -> d_model output one (MobileBERT: 128); null: "
            "no bottleneck, every sublayer at d_model",
            min=1,
        )
        attention_input: Literal["input", "inner", "qk_bottleneck"] = param(
            "input",
            "what the attention reads: the block input (no bottleneck), the input bottleneck "
            "(q, k and v), or q and k from a second bottleneck of their own and v from the "
            "d_model-wide block input (MobileBERT; the attention's value_width: d_model)",
        )
        n_ffn: int = param(
            1, "FFNs in a row after the attention, each with residual + norm (MobileBERT: 4)", min=1
        )

    @classmethod
    def sublayer_dims(cls, cfg: Any, dims: Dims) -> Dims:
        return dims if cfg.inner_dim is None else replace(dims, d_model=cfg.inner_dim)

    @classmethod
    def check(cls, cfg: Any, dims: Any) -> list[tuple[str, str]]:
        if cfg.inner_dim is None and cfg.attention_input != "input":
            return [("attention_input", f"{cfg.attention_input!r} needs an inner_dim")]
        if cfg.inner_dim is not None and cfg.attention_input == "input":
            problem = (
                "'input' (q and k at d_model) needs inner_dim: null; use 'inner' or 'qk_bottleneck'"
            )
            return [("attention_input", problem)]
        return []

    def __init__(
        self,
        cfg: Any,
        dims: Any,
        *,
        attention: nn.Module,
        ffn: nn.Module,
        make_norm: NormFactory,
        cross_attention: nn.Module | None = None,
        make_ffn: Callable[[], nn.Module] | None = None,
    ) -> None:
        if cross_attention is not None:  # validation refuses it first (cross_layer=False)
            raise ValueError("block 'bottleneck' has no cross-attention: use it in encoders")
        wanted = dims.d_model if cfg.attention_input == "qk_bottleneck" else None
        if getattr(attention.cfg, "value_width", None) != wanted:
            raise ValueError(
                f"block 'bottleneck' with attention_input {cfg.attention_input!r} needs "
                f"attention.value_width {wanted} (what its v projection reads)"
            )
        super().__init__(cfg, dims, attention=attention, ffn=ffn, make_norm=make_norm)
        width = cfg.inner_dim or dims.d_model
        if cfg.n_ffn > 1 and make_ffn is None:
            raise ValueError("block 'bottleneck' with n_ffn > 1 needs the builder's make_ffn")
        # the FFNs before the last, each followed by residual + norm
        self.ffns = nn.ModuleList([make_ffn() for _ in range(cfg.n_ffn - 1)])
        self.ffn_norms = nn.ModuleList([make_norm(width) for _ in range(cfg.n_ffn - 1)])
        self.attention_norm, self.ffn_norm = make_norm(width), make_norm(width)
        self.in_proj = self.in_norm = self.qk_proj = self.qk_norm = None
        self.out_proj = self.out_norm = None
        if cfg.inner_dim is not None:
            self.in_proj, self.in_norm = nn.Linear(dims.d_model, width), make_norm(width)
            if cfg.attention_input == "qk_bottleneck":
                self.qk_proj, self.qk_norm = nn.Linear(dims.d_model, width), make_norm(width)
            self.out_proj, self.out_norm = nn.Linear(width, dims.d_model), make_norm()

    def make_norms(self, make_norm: NormFactory, *, cross: bool) -> None:
        """None here: __init__ makes them at the inner width."""

    def forward(
        self,
        x: Tensor,
        self_ctx: AttentionContext,
        memory: Tensor | None = None,
        cross_ctx: AttentionContext | None = None,
    ) -> Tensor:
        narrow = self.in_proj is not None
        # residual: what the attention's output is added to (the input bottleneck, or x)
        residual = self.in_norm(self.in_proj(x)) if narrow else x  # (B, T, inner)
        qk, ctx = residual, self_ctx
        if self.qk_proj is not None:  # q, k from their own bottleneck; v from x (B, T, d)
            qk = self.qk_norm(self.qk_proj(x))
            ctx = self_ctx.with_cache(self_ctx.cache)  # a shallow copy for this call
            ctx.value_input = x
        a = self.attention(qk, ctx)
        if ctx is not self_ctx and self_ctx.want_probs:  # the stack's record reads them here
            self_ctx.probs = ctx.probs
        inner_drop = (lambda t: t) if narrow else self.dropout  # transformers' placement
        h = self.attention_norm(inner_drop(a) + residual)
        for ffn, norm in zip(self.ffns, self.ffn_norms, strict=True):
            h = norm(ffn(h) + h)
        h = self.ffn_norm(inner_drop(self.ffn(h)) + h)
        if not narrow:
            return h
        return self.out_norm(self.dropout(self.out_proj(h)) + x)  # (B, T, d_model)
