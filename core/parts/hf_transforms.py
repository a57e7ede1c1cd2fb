"""Tensor transforms of a converter table, each in both directions: HF -> archzoo and back.

`forward` takes the HF tensors of one rule and returns the archzoo tensors; `inverse` does
the opposite, so that `inverse(forward(x)) == x` (the export derives from the same rule).
`ctx` is the resolved spec data (`n_heads`, `d_model`, ...), for layouts that depend on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

Tensors = list[Tensor]


class Transform:
    """Identity: the HF tensor is the archzoo tensor (one in, one out)."""

    n_hf = 1  # HF tensors per rule
    n_zoo = 1  # archzoo tensors per rule

    def forward(self, ts: Tensors, ctx: dict[str, Any]) -> Tensors:
        """HF tensors -> archzoo tensors."""
        return list(ts)

    def inverse(self, ts: Tensors, ctx: dict[str, Any]) -> Tensors:
        """archzoo tensors -> HF tensors."""
        return list(ts)


IDENTITY = Transform()


class Transpose(Transform):
    """Weights stored (in, out) <-> (out, in) on the last two dims (Conv1D matrices, stacked
    expert matrices); vectors pass unchanged."""

    def forward(self, ts: Tensors, ctx: dict[str, Any]) -> Tensors:
        return [t.transpose(-1, -2) if t.dim() >= 2 else t for t in ts]  # a view: no copy

    inverse = forward


@dataclass(frozen=True)
class Fuse(Transform):
    """n HF projections (q, k, v) <-> one archzoo tensor concatenated on dim 0."""

    n: int = 3

    @property
    def n_hf(self) -> int:  # type: ignore[override]
        return self.n

    def forward(self, ts: Tensors, ctx: dict[str, Any]) -> Tensors:
        return [torch.cat(ts, dim=0)]

    def inverse(self, ts: Tensors, ctx: dict[str, Any]) -> Tensors:
        return list(ts[0].chunk(self.n, dim=0))


@dataclass(frozen=True)
class Reversed(Transform):
    """A transform read the other way round: `Reversed(Fuse(3))` splits one fused HF tensor
    into three archzoo tensors."""

    inner: Transform

    @property
    def n_hf(self) -> int:  # type: ignore[override]
        return self.inner.n_zoo

    @property
    def n_zoo(self) -> int:  # type: ignore[override]
        return self.inner.n_hf

    def forward(self, ts: Tensors, ctx: dict[str, Any]) -> Tensors:
        return self.inner.inverse(ts, ctx)

    def inverse(self, ts: Tensors, ctx: dict[str, Any]) -> Tensors:
        return self.inner.forward(ts, ctx)


@dataclass(frozen=True)
class HeadsInterleaved(Transform):
    """Fused rows laid out per head [h: q|k|v] (BLOOM, NeoX) <-> [q | k | v] blocks."""

    parts: int = 3

    def forward(self, ts: Tensors, ctx: dict[str, Any]) -> Tensors:
        t, heads = ts[0], ctx["n_heads"]
        rest = t.shape[1:]
        t = t.reshape(
            heads, self.parts, t.shape[0] // (self.parts * heads), *rest
        )  # (H, 3, hd, ..)
        return [t.transpose(0, 1).reshape(-1, *rest)]  # (3 * H * hd, ...)

    def inverse(self, ts: Tensors, ctx: dict[str, Any]) -> Tensors:
        t, heads = ts[0], ctx["n_heads"]
        rest = t.shape[1:]
        t = t.reshape(
            self.parts, heads, t.shape[0] // (self.parts * heads), *rest
        )  # (3, H, hd, ..)
        return [t.transpose(0, 1).reshape(-1, *rest)]  # (H * 3 * hd, ...)


class KVGrouped(Transform):
    """Fused rows grouped per key/value head [g: q_1 .. q_r | k_g | v_g] (Falcon) <-> [q | k | v]
    blocks; with one kv head it is the plain [q | k | v], with one per head BLOOM's layout."""

    @staticmethod
    def _heads(ctx: dict[str, Any]) -> tuple[int, int]:
        attention = ctx.get("attention")
        kv = attention.get("n_kv_heads") if isinstance(attention, dict) else None
        return ctx["n_heads"], kv or ctx["n_heads"]

    def forward(self, ts: Tensors, ctx: dict[str, Any]) -> Tensors:
        t, (heads, kv) = ts[0], self._heads(ctx)
        rest, hd = t.shape[1:], t.shape[0] // (heads + 2 * kv)
        g = t.reshape(kv, heads // kv + 2, hd, *rest)  # (Hkv, r + 2, hd, ...)
        q, k, v = g[:, :-2], g[:, -2], g[:, -1]  # (Hkv, r, hd, ...), (Hkv, hd, ...) twice
        return [torch.cat([x.reshape(-1, *rest) for x in (q, k, v)])]  # ((H + 2 Hkv) hd, ...)

    def inverse(self, ts: Tensors, ctx: dict[str, Any]) -> Tensors:
        t, (heads, kv) = ts[0], self._heads(ctx)
        rest, hd = t.shape[1:], t.shape[0] // (heads + 2 * kv)
        q, k, v = t.split([heads * hd, kv * hd, kv * hd])
        groups = [q.reshape(kv, heads // kv, hd, *rest)]  # (Hkv, r, hd, ...)
        groups += [x.reshape(kv, 1, hd, *rest) for x in (k, v)]  # (Hkv, 1, hd, ...)
        return [torch.cat(groups, dim=1).reshape(-1, *rest)]  # (Hkv (r + 2) hd, ...)


@dataclass(frozen=True)
class Sharded(Transform):
    """Fused rows saved in `shards` model-parallel blocks, each holding its share of every
    part in HF's `order` (CodeGen: 4 shards of [q | v | k]) <-> archzoo's [q | k | v] blocks;
    `order[j]` is the archzoo part at place j of a shard."""

    shards: int = 4
    order: tuple[int, ...] = (0, 2, 1)

    def forward(self, ts: Tensors, ctx: dict[str, Any]) -> Tensors:
        t, n = ts[0], len(self.order)
        rest = t.shape[1:]
        t = t.reshape(self.shards, n, t.shape[0] // (self.shards * n), *rest)  # (S, n, E/S, ..)
        parts = [t[:, self.order.index(p)].reshape(-1, *rest) for p in range(n)]  # (E, ...)
        return [torch.cat(parts)]  # (n E, ...)

    def inverse(self, ts: Tensors, ctx: dict[str, Any]) -> Tensors:
        t, n = ts[0], len(self.order)
        rest = t.shape[1:]
        t = t.reshape(n, self.shards, t.shape[0] // (self.shards * n), *rest)  # (n, S, E/S, ..)
        hf = t[list(self.order)]  # (n, S, E/S, ...): place j holds archzoo part order[j]
        return [hf.transpose(0, 1).reshape(-1, *rest)]  # (S n E/S, ...)


class RotaryInterleaved(Transform):
    """q/k rows rotated in adjacent pairs (x0, x1), (x2, x3) (Meta's layout) <-> rotate-half
    order (first half, second half of each head), the layout archzoo's rotary uses."""

    @staticmethod
    def _head_dim(ctx: dict[str, Any]) -> int:
        return ctx.get("head_dim") or ctx["d_model"] // ctx["n_heads"]

    def forward(self, ts: Tensors, ctx: dict[str, Any]) -> Tensors:
        t, hd = ts[0], self._head_dim(ctx)
        rest = t.shape[1:]
        t = t.reshape(t.shape[0] // hd, hd // 2, 2, *rest)  # (H, hd/2, 2, ...)
        return [t.transpose(1, 2).reshape(-1, *rest)]  # (H * hd, ...)

    def inverse(self, ts: Tensors, ctx: dict[str, Any]) -> Tensors:
        t, hd = ts[0], self._head_dim(ctx)
        rest = t.shape[1:]
        t = t.reshape(t.shape[0] // hd, 2, hd // 2, *rest)  # (H, 2, hd/2, ...)
        return [t.transpose(1, 2).reshape(-1, *rest)]  # (H * hd, ...)


class HalvesSwapped(Transform):
    """q/k rows whose heads rotate the other way (NanoChat's rotate_half: [x2, -x1], a
    rotation by -angle) <-> each head's two halves swapped, which archzoo's rotary turns by
    +angle: swap . R(a) . swap = R(-a), and scores are unchanged by a permutation of the
    features both q and k share. Its own inverse."""

    def forward(self, ts: Tensors, ctx: dict[str, Any]) -> Tensors:
        t, hd = ts[0], RotaryInterleaved._head_dim(ctx)
        rest = t.shape[1:]
        t = t.reshape(t.shape[0] // hd, 2, hd // 2, *rest)  # (H, 2, hd/2, ...)
        return [t.flip(1).reshape(-1, *rest)]  # (H * hd, ...)

    inverse = forward


class Deinterleave(Transform):
    """Last dim alternating [a0, b0, a1, b1, ...] (GPT-OSS's fused expert gate/up) <->
    halves [a0, a1, ... | b0, b1, ...] (archzoo's [gate | up])."""

    def forward(self, ts: Tensors, ctx: dict[str, Any]) -> Tensors:
        t = ts[0]
        return [torch.cat([t[..., 0::2], t[..., 1::2]], dim=-1)]

    def inverse(self, ts: Tensors, ctx: dict[str, Any]) -> Tensors:
        t = ts[0]
        halves = t.reshape(*t.shape[:-1], 2, t.shape[-1] // 2)  # (..., 2, F)
        return [halves.transpose(-1, -2).reshape(t.shape)]  # (..., F, 2) -> (..., 2F)


class RowsDeinterleaved(Transform):
    """Rows alternating [a0, b0, a1, b1, ...] (Zamba's Mamba in_proj: x and gate per channel)
    <-> halves [a0, a1, ... | b0, b1, ...] (archzoo's [x | z]); weights and biases alike."""

    def forward(self, ts: Tensors, ctx: dict[str, Any]) -> Tensors:
        t = ts[0]
        return [torch.cat([t[0::2], t[1::2]], dim=0)]

    def inverse(self, ts: Tensors, ctx: dict[str, Any]) -> Tensors:
        t = ts[0]
        halves = t.reshape(2, t.shape[0] // 2, *t.shape[1:])  # (2, F, ...)
        return [halves.transpose(0, 1).reshape(t.shape)]  # (F, 2, ...) -> (2F, ...)


@dataclass(frozen=True)
class ExpertRows(Transform):
    """Experts saved as (E * F, D) row blocks (DBRX: w1 gate and v1 up, or w2 down, expert e
    in rows e*F..) <-> archzoo's stacked (E, D, 2F) [gate | up] (two HF tensors) or the
    (E, F, D) down projection (one)."""

    n: int = 1

    @property
    def n_hf(self) -> int:  # type: ignore[override]
        return self.n

    def forward(self, ts: Tensors, ctx: dict[str, Any]) -> Tensors:
        E = ctx["ffn"]["n_experts"]
        views = [t.reshape(E, t.shape[0] // E, t.shape[-1]) for t in ts]  # (E, F, D) each
        if len(views) == 1:
            return views
        return [torch.cat(views, dim=1).transpose(1, 2)]  # (E, 2F, D) -> (E, D, 2F)

    def inverse(self, ts: Tensors, ctx: dict[str, Any]) -> Tensors:
        t = ts[0]
        if self.n == 1:
            return [t.reshape(-1, t.shape[-1])]  # (E F, D)
        parts = t.transpose(1, 2).chunk(2, dim=1)  # (E, F, D) each
        return [p.reshape(-1, p.shape[-1]) for p in parts]


class Flatten(Transform):
    """A (1, n) HF buffer (BART's final_logits_bias) <-> an (n,) archzoo vector."""

    def forward(self, ts: Tensors, ctx: dict[str, Any]) -> Tensors:
        return [ts[0].reshape(-1)]

    def inverse(self, ts: Tensors, ctx: dict[str, Any]) -> Tensors:
        return [ts[0].reshape(1, -1)]


@dataclass(frozen=True)
class OffsetRows(Transform):
    """An HF table with `n` leading rows never looked up <-> archzoo's table without them;
    the inverse writes those rows as zeros."""

    n: int

    def forward(self, ts: Tensors, ctx: dict[str, Any]) -> Tensors:
        return [ts[0][self.n :]]

    def inverse(self, ts: Tensors, ctx: dict[str, Any]) -> Tensors:
        t = ts[0]
        return [torch.cat([t.new_zeros(self.n, *t.shape[1:]), t], dim=0)]


class ReverseRows(Transform):
    """An HF table indexed the other way round (BERT's distance rows by i - j) <-> archzoo's
    (by j - i): the rows in reverse order, both ways."""

    def forward(self, ts: Tensors, ctx: dict[str, Any]) -> Tensors:
        return [ts[0].flip(0)]

    inverse = forward


class Kernel1(Transform):
    """A kernel-size-1 Conv1d weight (out, in / groups, 1) <-> archzoo's linear weight
    (out, in / groups) (SqueezeBERT's projections); biases pass unchanged."""

    def forward(self, ts: Tensors, ctx: dict[str, Any]) -> Tensors:
        return [t.squeeze(-1) if t.dim() == 3 else t for t in ts]

    def inverse(self, ts: Tensors, ctx: dict[str, Any]) -> Tensors:
        return [t.unsqueeze(-1) if t.dim() == 2 else t for t in ts]


class Column(Transform):
    """An (n, 1) HF column (ConvBERT's separable-convolution bias) <-> an (n,) vector."""

    def forward(self, ts: Tensors, ctx: dict[str, Any]) -> Tensors:
        return [ts[0].reshape(-1)]

    def inverse(self, ts: Tensors, ctx: dict[str, Any]) -> Tensors:
        return [ts[0].reshape(-1, 1)]


@dataclass(frozen=True)
class GroupBlocks(Transform):
    """A block-diagonal weight saved as its blocks (G, in / G, out / G), group g mapping
    inputs g to outputs g as x_g @ W[g] (ConvBERT's grouped FFN) <-> archzoo's GroupedLinear
    weight (out, in / G), the blocks' transposes stacked. A 2-D weight (one group: a plain
    nn.Linear) and biases pass unchanged; the inverse reads G from the spec's `option`."""

    option: str = "ffn.in_groups"

    def forward(self, ts: Tensors, ctx: dict[str, Any]) -> Tensors:
        t = ts[0]
        if t.dim() != 3:
            return [t]
        return [t.transpose(1, 2).reshape(-1, t.shape[1])]  # (G, out/G, in/G) -> (out, in/G)

    def inverse(self, ts: Tensors, ctx: dict[str, Any]) -> Tensors:
        t, (kind, key) = ts[0], self.option.split(".")
        groups = int(ctx[kind].get(key, 1))
        if t.dim() != 2 or groups == 1:
            return [t]
        return [t.reshape(groups, -1, t.shape[1]).transpose(1, 2)]  # (G, in/G, out/G)


class Compose(Transform):
    """Two linear layers with nothing between (W1, b1, W2, b2: XLM's multiple-choice summary
    then logits_proj) <-> the one linear they make (W2 W1, W2 b1 + b2). The inverse writes
    that map through a 2-wide middle (its first unit carries it): equal as a function, not
    the original factors."""

    n_hf = 4
    n_zoo = 2

    def forward(self, ts: Tensors, ctx: dict[str, Any]) -> Tensors:
        w1, b1, w2, b2 = ts  # (M, D), (M,), (O, M), (O,)
        return [w2 @ w1, w2 @ b1 + b2]  # (O, D), (O,)

    def inverse(self, ts: Tensors, ctx: dict[str, Any]) -> Tensors:
        w, b = ts  # (O, D), (O,)
        width = max(2, w.shape[0])  # transformers' default num_labels is 2
        w1, b1 = w.new_zeros(width, w.shape[1]), b.new_zeros(width)
        w1[: w.shape[0]], b1[: w.shape[0]] = w, b
        w2 = torch.eye(w.shape[0], width, dtype=w.dtype, device=w.device)  # (O, width)
        return [w1, b1, w2, b.new_zeros(b.shape)]


def named(name: str | None, n_hf: int, n_zoo: int) -> Transform:
    """A transform by its table name, sized by how many HF and archzoo names the rule has."""
    makers = {
        None: lambda: IDENTITY,
        "transpose": Transpose,
        "fuse": lambda: Fuse(n_hf),
        "split": lambda: Reversed(Fuse(n_zoo)),
        "heads_interleaved": HeadsInterleaved,
        "kv_grouped": KVGrouped,
        "shards_qvk": Sharded,  # CodeGen's 4 shards of [q | v | k]
        "expert_rows": lambda: ExpertRows(n_hf),  # DBRX's (E F, D) expert blocks
        "rotary_interleaved": RotaryInterleaved,
        "halves_swapped": HalvesSwapped,
        "flatten": Flatten,
        "deinterleave": Deinterleave,
        "rows_deinterleaved": RowsDeinterleaved,  # Zamba's Mamba in_proj [x0, z0, x1, ...]
        "compose": Compose,
        "reverse_rows": ReverseRows,
        "kernel1": Kernel1,
        "column": Column,  # ConvBERT's (n, 1) convolution bias
        "group_blocks_in": lambda: GroupBlocks("ffn.in_groups"),  # ConvBERT's grouped FFN
        "group_blocks_out": lambda: GroupBlocks("ffn.out_groups"),
    }
    if name not in makers:
        raise ValueError(f"unknown transform {name!r}; known: {', '.join(map(str, makers))}")
    return makers[name]()
