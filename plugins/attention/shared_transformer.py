"""A transformer block shared across layers whose output joins a mixer's input (Zamba 2,
Glorioso et al., 2024).

Layer j runs t = proj_j(S(x, e)), then returns mixer(norm(x + t)) (the block around it adds
x back: its own norm off). S reads the layer input x beside the stack's embedding output e,
2 d_model wide, with no residual inside:

    h = in_norm([x | e]);  a = attention(h)  (heads of head_dim over 2 d_model, out d_model)
    S = ffn(ffn_norm(a))   (a gated FFN)

S's weights are one set for every layer naming the same `shared_block` (one module under
each of them); each layer keeps its own proj, norm, mixer and low-rank adapters (LoRA: q, k
and v += up(down(h)), the FFN's [gate | up] += up(down(.))). Decoding caches the shared
attention's keys and values per layer beside the mixer's state (a PartsCache).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Literal

import torch
from torch import Tensor, nn

from archzoo.parts.component import param
from archzoo.parts.interfaces import Attention, AttentionContext, NormFactory
from archzoo.parts.registry import get_registry

from .side_by_side import mixer_class, mixer_config


class LowRank(nn.Module):
    """x -> up(down(x)) through `rank` channels, no biases (a LoRA-style adapter)."""

    def __init__(self, width: int, rank: int, out: int) -> None:
        super().__init__()
        self.down = nn.Linear(width, rank, bias=False)
        self.up = nn.Linear(rank, out, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.up(self.down(x))


class SharedBlock(nn.Module):
    """S(x, e): the norms, attention and gated FFN one or more layers run."""

    def __init__(self, cfg: Any, dims: Any, make_norm: NormFactory) -> None:
        super().__init__()
        d, registry = dims.d_model, get_registry()
        wide = replace(dims, d_model=2 * d)  # the attention reads [x | e]
        mha = registry.get("attention", "mha")
        own = mha.Config(n_kv_heads=cfg.n_kv_heads, fused_qkv=False, bias=False, scale=cfg.scale)
        self.in_norm = make_norm(2 * d)
        self.attention = mha(own, wide)
        self.attention.out = nn.Linear(self.attention.q_dim, d, bias=False)  # back to d_model
        self.ffn_norm = make_norm()
        glu = registry.get("ffn", "glu")
        ffn_dims = replace(dims, d_ff=cfg.d_ff or dims.d_ff)
        self.ffn = glu(glu.Config(activation=cfg.activation, bias=cfg.ffn_bias), ffn_dims)

    def forward(
        self, x: Tensor, e: Tensor, ctx: AttentionContext, use: SharedTransformer
    ) -> Tensor:
        att, ffn = self.attention, self.ffn
        h = self.in_norm(torch.cat([x, e], dim=-1))  # (B, T, 2 d_model)
        q, k, v = att.q(h), att.k(h), att.v(h)
        if use.q_adapter is not None:
            q, k, v = q + use.q_adapter(h), k + use.k_adapter(h), v + use.v_adapter(h)
        q, k, v = att._heads(q, att.n_heads), att._heads(k, att.n_kv), att._heads(v, att.n_kv)
        if ctx.position is not None:  # q (B, H, T, hd), k and v (B, Hkv, T, hd)
            q, k = ctx.position.rotate(ctx.position_state, q, k)
        if ctx.cache is not None:
            k, v = ctx.cache.append(k, v)
        a, _ = att.attend_qkv(h, q, k, v, ctx)  # (B, T, d_model)
        a = self.ffn_norm(a)
        gate, up = ffn.gate(a), ffn.up(a)
        if use.ffn_adapter is not None:
            more_gate, more_up = use.ffn_adapter(a).chunk(2, dim=-1)  # (B, T, d_ff) each
            gate, up = gate + more_gate, up + more_up
        return ffn.down(ffn.act(gate) * up)


class SharedTransformer(
    Attention, name="shared_transformer", bidirectional=False, accepts_bias=False, kv_cache=True
):
    """a transformer block shared across layers on [x | embeddings], projected into a mixer's input (Zamba 2)"""

    class Config:
        mixer: dict = param(
            {"kind": "mamba2"},
            "the token mixer the block's output feeds (a mapping with kind:)",
            components="attention",
        )
        shared_block: int = param(
            0, "which shared block this layer runs; layers naming one share its weights", min=0
        )
        n_kv_heads: int | None = param(
            None, "the shared attention's key/value heads (null: n_heads)", min=1, null="n_heads"
        )
        scale: float | None = param(None, "its score scale (null: 1/sqrt(head_dim))", gt=0.0)
        d_ff: int | None = param(None, "its FFN's width (null: the spec's d_ff)", min=1)
        activation: Literal["swiglu", "geglu", "geglu_tanh", "reglu"] = param(
            "geglu", "its gated FFN's gate (as the glu ffn's activation)"
        )
        ffn_bias: bool = param(False, "biases on its FFN's projections")
        adapter_rank: int = param(0, "rank of this layer's own low-rank adapters (0: none)", min=0)
        attention_adapters: bool = param(True, "adapters on q, k and v (with adapter_rank)")
        ffn_adapter: bool = param(True, "an adapter on the FFN's gate and up (with adapter_rank)")

    def __init__(
        self,
        cfg: Any,
        dims: Any,
        *,
        make_norm: NormFactory,
        shared: dict[str, nn.Module] | None = None,
        layer_index: int = 0,
    ) -> None:
        super().__init__(cfg, dims)
        d, rank = dims.d_model, cfg.adapter_rank
        ((key, shape),) = self.shared_modules(cfg).items()
        block = None if shared is None else shared.get(key)
        if block is None:
            block = SharedBlock(cfg, dims, make_norm)
            block.shape = shape  # what every other layer naming it must state
            if shared is not None:
                shared[key] = block
        elif block.shape != shape:
            raise ValueError(  # validation reports it first (shared_modules)
                f"layer {layer_index}: attention 'shared_transformer' builds the shared {key} "
                f"with {shape}, an earlier layer with {block.shape}: a shared module has one set"
            )
        self.shared = block
        self.proj = nn.Linear(d, d, bias=False)  # the block's output into the mixer's input
        self.mixer_norm = make_norm()
        self.mixer = mixer_class(cfg.mixer)(mixer_config(cfg.mixer), dims)
        att = block.attention
        with_attention = rank > 0 and cfg.attention_adapters
        self.q_adapter = LowRank(2 * d, rank, att.q_dim) if with_attention else None
        self.k_adapter = LowRank(2 * d, rank, att.kv_dim) if with_attention else None
        self.v_adapter = LowRank(2 * d, rank, att.kv_dim) if with_attention else None
        d_ff = cfg.d_ff or dims.d_ff
        self.ffn_adapter = LowRank(d, rank, 2 * d_ff) if rank > 0 and cfg.ffn_adapter else None

    @classmethod
    def shared_modules(cls, cfg: Any) -> dict[str, Any]:
        """Its shared block, by number, with the options that shape it."""
        options = ("n_kv_heads", "scale", "d_ff", "activation", "ffn_bias")
        return {f"block {cfg.shared_block}": {k: getattr(cfg, k) for k in options}}

    @classmethod
    def check(cls, cfg: Any, dims: Any) -> list[tuple[str, str]]:
        issues: list[tuple[str, str]] = []
        if cfg.n_kv_heads is not None and dims.n_heads % cfg.n_kv_heads:
            why = f"n_heads {dims.n_heads} is not divisible by n_kv_heads {cfg.n_kv_heads}"
            issues.append(("n_kv_heads", why))
        if cfg.mixer is None:
            return issues  # its own error is reported where it was resolved
        own = mixer_class(cfg.mixer)
        if own is cls or own.cache_parts is not Attention.cache_parts:
            issues.append(("mixer", f"attention {own.name!r} cannot be nested here"))
        elif not own.capabilities.causal or not own.capabilities.kv_cache:
            issues.append(("mixer", f"attention {own.name!r} cannot decode causally with a cache"))
        else:
            issues += [(f"mixer.{p}", why) for p, why in own.check(mixer_config(cfg.mixer), dims)]
        return issues

    def cache_parts(self) -> tuple[Attention, ...]:
        """The shared attention's keys and values of this layer, then the mixer's state."""
        return (self.shared.attention, self.mixer)

    def attention_flops(self, context: int, causal: bool) -> float:
        shared = self.shared.attention.attention_flops(context, causal)
        return shared + self.mixer.attention_flops(context, causal)

    def forward(self, x: Tensor, ctx: AttentionContext, memory: Tensor | None = None) -> Tensor:
        if ctx.embeddings is None:
            raise ValueError(
                "attention 'shared_transformer' reads the stack's embedding output "
                "(AttentionContext.embeddings), which this call does not give"
            )
        parts = None if ctx.cache is None else ctx.cache.parts
        own = ctx.with_cache(None if parts is None else parts[0])
        own.want_probs = False  # the layer's output is the mixer's: no probabilities of its own
        t = self.proj(self.shared(x, ctx.embeddings, own, self))  # (B, T, d_model)
        mixer_ctx = ctx.with_cache(None if parts is None else parts[1])
        mixer_ctx.want_probs = False
        return self.mixer(self.mixer_norm(x + t), mixer_ctx)
