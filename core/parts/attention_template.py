"""The one attention template: project -> position -> cache -> score bias -> kernel -> output.

A component supplies its projections (`project_qkv`, `project_q`, `project_kv`, `out`), its
scoring terms (`scoring_terms`) and, for a sparse one, a pattern (`pattern`); the template
runs the steps in order and hands q, k, v, the mask and the `Scoring` to the layer's kernel,
chosen by name at run time (`set_attention_impl`), never in the spec.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor

from . import attention_probs as _probs
from .interfaces import Attention, AttentionContext
from .kernels import FALLBACK, Scoring, dispatch
from .masks import AttentionMask, Pattern
from .registry import get_registry


class KernelRunner:
    """Mixin of an attention module: run q, k, v through its kernel (`attention_impl`)."""

    attention_impl: str

    def run_kernel(
        self, q: Tensor, k: Tensor, v: Tensor, mask: AttentionMask, scoring: Scoring
    ) -> tuple[Tensor, Tensor | None]:
        """Step 5: the layer's kernel, or `auto` where it refuses the call; the probabilities
        (B, H, Tq, Tk) when `scoring.want_probs`, recomputed if the kernel forms none."""
        registry = get_registry()
        kernel = registry.kernel(self.attention_impl)
        fallback = lambda: registry.kernel(FALLBACK)  # noqa: E731
        out, probs = dispatch(kernel, q, k, v, mask, scoring, fallback)
        if scoring.want_probs and probs is None:
            probs = self.probabilities(q, k, mask, scoring)
        return out, probs

    def probabilities(self, q: Tensor, k: Tensor, mask: AttentionMask, scoring: Scoring) -> Tensor:
        """(B, H, Tq, Tk) when the kernel returned none: recomputed beside its output."""
        scale = scoring.scale_of(q)
        return _probs.attention_probs(
            q, k, mask, scale=scale, bias=scoring.bias, sinks=scoring.sinks, softcap=scoring.softcap
        )


class AttentionTemplate(KernelRunner, Attention):
    """Projections + a pattern, run through the template by the layer's kernel."""

    def __init__(self, cfg: Any, dims: Any) -> None:
        super().__init__(cfg, dims)
        self.dropout = dims.attention_dropout
        self.uses_position = True  # False: a layer that sees no positions (NoPE)

    # ------------------------------------------------------------ what a component supplies

    def project_qkv(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Self-attention: q (B, H, T, hd), k and v (B, Hkv, T, hd) of the new tokens."""
        return (self.project_q(x), *self.project_kv(x))

    def project_q(self, x: Tensor) -> Tensor:
        """q (B, H, T, hd) of x (B, T, d_model)."""
        raise NotImplementedError

    def project_kv(self, src: Tensor) -> tuple[Tensor, Tensor]:
        """k and v (B, Hkv, Tk, hd) of a source sequence."""
        raise NotImplementedError

    def scoring_terms(self) -> dict[str, Any]:
        """The layer's own `Scoring` terms: scale, softcap, sinks, broadcast_kv."""
        return {}

    def after_position(self, q: Tensor, k: Tensor) -> tuple[Tensor, Tensor]:
        """q (B, H, T, hd) and k (B, Hkv, T, hd) after the position's rotation, before the
        cache: a layer that normalises them there (qk_norm_after_position) does it here."""
        return q, k

    def pattern(self, length: int, device: Any, ctx: AttentionContext) -> Pattern | None:
        """A sparse pattern over `length` keys, or None for dense attention."""
        return None

    def global_qkv(self, x: Tensor, pattern: Pattern | None) -> Any:
        """Separate q, k, v for a pattern's global query rows (Longformer), or None."""
        return None

    # ------------------------------------------------------------ the template

    def project(
        self, x: Tensor, ctx: AttentionContext, memory: Tensor | None
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Steps 1-3: project, position, cache. q (B, H, Tq, hd), k and v (B, Hkv, Tk, hd)."""
        if memory is not None:  # cross-attention: the memory's keys and values, once
            q = self.project_q(x)
            cache = ctx.cache
            if cache is not None and cache.k is not None:
                return q, cache.k, cache.v
            k, v = self.project_kv(memory)
            if cache is not None:
                cache.k, cache.v = k, v
            return q, k, v
        if ctx.value_input is None:
            q, k, v = self.project_qkv(x)
        else:  # v from the block's other tensor (Projections' value_width)
            q, k, v = self.project_qkv(x, ctx.value_input)
        if ctx.position is not None and self.uses_position:
            q, k = ctx.position.rotate(ctx.position_state, q, k)
        q, k = self.after_position(q, k)
        if ctx.cache is not None:
            k, v = ctx.cache.append(k, v)
        return q, k, v

    def make_scoring(self, q: Tensor, k: Tensor, ctx: AttentionContext, **more: Any) -> Scoring:
        """Step 4: the layer's terms with the position's score bias and value term."""
        terms = self.scoring_terms()
        position = ctx.position if self.uses_position else None
        bias = values = None
        if position is not None:
            scale = terms.get("scale")
            scale = scale if scale is not None else q.shape[-1] ** -0.5
            bias = position.score_bias(ctx.position_state, q, k, scale)
            if position.capabilities.values:
                state = ctx.position_state
                values = lambda probs: position.value_bias(state, probs)  # noqa: E731
        dropout = self.dropout if self.training else 0.0
        return Scoring(
            bias=bias, values=values, dropout=dropout, want_probs=ctx.want_probs, **terms, **more
        )

    def attend(
        self, x: Tensor, ctx: AttentionContext, memory: Tensor | None = None
    ) -> tuple[Tensor, Tensor | None]:
        """(B, Tq, d_model) and the probabilities (B, H, Tq, Tk) when asked, else None."""
        q, k, v = self.project(x, ctx, memory)
        return self.attend_qkv(x, q, k, v, ctx, memory)

    def attend_qkv(
        self,
        x: Tensor,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        ctx: AttentionContext,
        memory: Tensor | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """Steps 4-6 on projected, positioned and cached q (B, H, Tq, hd), k, v (B, Hkv, Tk,
        hd): the output (B, Tq, d_model) and the probabilities when asked."""
        mask = ctx.mask
        pattern = self.pattern(k.shape[2], q.device, ctx)
        if pattern is not None:
            mask = mask.with_pattern(pattern)
        more = {}
        if pattern is not None and memory is None:
            global_qkv = self.global_qkv(x, pattern)
            if global_qkv is not None:
                more["global_qkv"] = global_qkv
        scoring = self.make_scoring(q, k, ctx, **more)
        out, probs = self.run_kernel(q, k, v, mask, scoring)
        return self.merge_heads(out), probs

    def merge_heads(self, out: Tensor) -> Tensor:
        """Step 6: the kernel's heads (B, H, Tq, hd_v) through the output projection to
        (B, Tq, d_model); a component that combines heads first (differential) overrides it."""
        B, _, Tq, _ = out.shape
        return self.out(out.transpose(1, 2).reshape(B, Tq, -1))  # (B, Tq, H*hd_v)
