"""Multi-head attention (Vaswani et al., 2017) with MQA/GQA: projections on the template.

The layer supplies its projections (projections.py); the core's template (archzoo.
attention_template) rotates, caches, adds the position's score bias and runs the layer's
kernel, chosen by name at run time (`set_attention_impl`: SDPA by default).
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from archzoo.parts.attention_template import AttentionTemplate
from archzoo.parts.interfaces import Attention, NormFactory

from .projections import ProjectionConfig, Projections, projection_issues


class MultiHeadAttention(
    Projections, AttentionTemplate, name="mha", cross=True, kv_cache=True, mup=True
):
    """dense multi-head attention (n_kv_heads for MQA/GQA); the kernel is chosen at run time"""

    class Config(ProjectionConfig):
        pass

    def __init__(
        self, cfg: Any, dims: Any, *, cross: bool = False, make_norm: NormFactory | None = None
    ) -> None:
        super().__init__(cfg, dims)
        self.build_projections(cfg, dims, cross=cross, make_norm=make_norm)

    @classmethod
    def check(cls, cfg: Any, dims: Any) -> list[tuple[str, str]]:
        return projection_issues(cfg, dims)

    @classmethod
    def cross_attention(cls, cfg: Any, dims: Any, **parts: Any) -> Attention:
        """Dense `mha` with this layer's projection settings (also for sparse layers)."""
        own = {f.name: getattr(cfg, f.name) for f in fields(ProjectionConfig)}
        make_norm = parts.get("make_norm")
        return MultiHeadAttention(
            MultiHeadAttention.Config(**own), dims, cross=True, make_norm=make_norm
        )
