"""Token mixers side by side (Falcon-H1's parallel hybrid): every mixer reads the same
input, each times its own input scale, and the layer's output is the sum of their outputs,
each times its own output scale (muP multipliers), in the order listed.

The mixers are attention components given as spec mappings (`mixers:`, resolved like any
component, every default explicit). Each keeps its own cache while decoding (a PartsCache:
keys and values for an attention, a recurrent state for a state-space mixer).
"""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from archzoo.parts.component import param
from archzoo.parts.interfaces import Attention, AttentionContext
from archzoo.parts.registry import get_registry


def mixer_class(spec: dict[str, Any]) -> type[Attention]:
    """The attention class a resolved mixer mapping names."""
    return get_registry().get("attention", spec["kind"])


def mixer_config(spec: dict[str, Any]) -> Any:
    """The typed config of a resolved mixer mapping."""
    return mixer_class(spec).Config(**{k: v for k, v in spec.items() if k != "kind"})


class SideBySide(
    Attention, name="side_by_side", bidirectional=False, accepts_bias=False, kv_cache=True
):
    """mixers on the same input, outputs summed with input and output scales (Falcon-H1)"""

    class Config:
        mixers: list[dict] = param(
            [],
            "the attention components run side by side (each a mapping with kind:)",
            components="attention",
        )
        input_scales: list[float] | None = param(
            None, "multiply each mixer's input by this (muP; null: 1 each)"
        )
        output_scales: list[float] | None = param(
            None, "multiply each mixer's output by this before the sum (muP; null: 1 each)"
        )

    def __init__(self, cfg: Any, dims: Any, **parts: Any) -> None:
        super().__init__(cfg, dims)
        self.mixers = nn.ModuleList(
            mixer_class(m)(mixer_config(m), dims, **parts) for m in cfg.mixers
        )
        n = len(cfg.mixers)
        self.input_scales = list(cfg.input_scales or [1.0] * n)
        self.output_scales = list(cfg.output_scales or [1.0] * n)

    @classmethod
    def check(cls, cfg: Any, dims: Any) -> list[tuple[str, str]]:
        issues: list[tuple[str, str]] = []
        if len(cfg.mixers) < 2:
            issues.append(("mixers", f"needs at least two mixers, got {len(cfg.mixers)}"))
        for key in ("input_scales", "output_scales"):
            scales = getattr(cfg, key)
            if scales is not None and len(scales) != len(cfg.mixers):
                issues.append(
                    (key, f"needs one number per mixer ({len(cfg.mixers)}), got {len(scales)}")
                )
        for i, m in enumerate(cfg.mixers):
            if m is None:
                continue  # its own error is reported where it was resolved
            own = mixer_class(m)
            where = f"mixers[{i}]"
            if own.cache_parts is not Attention.cache_parts or own is cls:
                issues.append((where, f"attention {own.name!r} cannot be nested here"))
                continue
            if not own.capabilities.causal or not own.capabilities.kv_cache:
                issues.append(
                    (where, f"attention {own.name!r} cannot decode causally with a cache")
                )
            issues += [(f"{where}.{p}", why) for p, why in own.check(mixer_config(m), dims)]
        return issues

    def cache_parts(self) -> tuple[Attention, ...]:
        return tuple(self.mixers)

    def attention_flops(self, context: int, causal: bool) -> float:
        return sum(m.attention_flops(context, causal) for m in self.mixers)

    def forward(self, x: Tensor, ctx: AttentionContext, memory: Tensor | None = None) -> Tensor:
        parts = None if ctx.cache is None else ctx.cache.parts
        out = None
        for k, mixer in enumerate(self.mixers):
            own = ctx.with_cache(None if parts is None else parts[k])
            own.want_probs = False  # the sum has no attention probabilities of its own
            scale_in, scale_out = self.input_scales[k], self.output_scales[k]
            y = mixer(x if scale_in == 1.0 else x * scale_in, own)
            y = y if scale_out == 1.0 else y * scale_out
            out = y if out is None else out + y
        return out
