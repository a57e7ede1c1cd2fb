"""Static key/value caches for incremental decoding: allocated once, written in place."""

from __future__ import annotations

import torch
from torch import Tensor


class LayerCache:
    """Keys and values of one self-attention layer: (B, Hkv, capacity, hd), filled in order.

    With a `window`, only the last `window` keys are kept (a ring buffer); `positions` and
    `valid` then say which absolute position and padding state each slot holds.
    """

    def __init__(
        self,
        batch: int,
        n_kv_heads: int,
        head_dim: int,
        capacity: int,
        *,
        window: int | None,
        dtype: torch.dtype,
        device: torch.device,
    ) -> None:
        shape = (batch, n_kv_heads, capacity, head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.window = window
        self.capacity = capacity
        self.length = 0  # tokens written so far (may exceed capacity with a window)
        self.positions = torch.full((batch, capacity), -1, dtype=torch.long, device=device)
        self.valid = torch.zeros(batch, capacity, dtype=torch.bool, device=device)

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Store new keys/values (B, Hkv, T, hd); return every stored one (full cache)."""
        t, start = k.shape[2], self.length
        if self.window is None:
            if start + t > self.capacity:
                raise ValueError(
                    f"KV cache holds {self.capacity} tokens; cannot add {t} more after {start}"
                )
            self.k[:, :, start : start + t] = k
            self.v[:, :, start : start + t] = v
            self.length = start + t
            return self.k[:, :, : self.length], self.v[:, :, : self.length]
        keep = min(t, self.capacity)  # ring buffer: only the newest `capacity` keys survive
        slots = (torch.arange(start + t - keep, start + t, device=k.device)) % self.capacity
        self.k[:, :, slots] = k[:, :, t - keep :]
        self.v[:, :, slots] = v[:, :, t - keep :]
        self.length = start + t
        return self.k, self.v

    def record(self, positions: Tensor, valid: Tensor) -> None:
        """Remember absolute positions and padding of the tokens just appended (B, T)."""
        t = positions.shape[1]
        start = self.length - t
        if self.window is None:
            self.positions[:, start : start + t] = positions
            self.valid[:, start : start + t] = valid
            return
        keep = min(t, self.capacity)
        slots = torch.arange(start + t - keep, start + t, device=positions.device) % self.capacity
        self.positions[:, slots] = positions[:, t - keep :]
        self.valid[:, slots] = valid[:, t - keep :]

    def reorder(self, index: Tensor) -> None:
        """Keep batch rows `index` (beam search)."""
        for name in ("k", "v", "positions", "valid"):
            setattr(self, name, getattr(self, name).index_select(0, index))


class CrossCache:
    """Cross-attention keys/values, computed from the encoder output once per generation."""

    def __init__(self) -> None:
        self.k: Tensor | None = None
        self.v: Tensor | None = None

    def reorder(self, index: Tensor) -> None:
        if self.k is not None:
            self.k, self.v = self.k.index_select(0, index), self.v.index_select(0, index)


class KVCache:
    """Every layer's cache for one stack, plus the positions and padding of cached tokens."""

    def __init__(
        self,
        layers: list[LayerCache],
        cross: list[CrossCache] | None,
        *,
        batch: int,
        capacity: int,
        device: torch.device,
    ) -> None:
        self.layers = layers
        self.cross = cross
        self.capacity = capacity
        self.length = 0
        self.positions = torch.zeros(batch, capacity, dtype=torch.long, device=device)
        self.key_padding = torch.ones(batch, capacity, dtype=torch.bool, device=device)
        self.padded = False  # whether any cached token was padding

    def advance(
        self, positions: Tensor, key_padding: Tensor | None
    ) -> tuple[Tensor, Tensor | None]:
        """Register the next (B, T) tokens; return positions and padding of all cached keys."""
        t, start = positions.shape[1], self.length
        if start + t > self.capacity:
            raise ValueError(
                f"KV cache holds {self.capacity} tokens; cannot add {t} more after {start}"
            )
        self.positions[:, start : start + t] = positions
        if key_padding is not None:
            if key_padding.shape[1] != start + t:
                raise ValueError(
                    f"with a KV cache, attention_mask must cover all {start + t} tokens "
                    f"(cached and new), got {key_padding.shape[1]}"
                )
            self.key_padding[:, : start + t] = key_padding.to(torch.bool)
            self.padded = self.padded or not bool(key_padding.all())
        self.length = start + t
        pad = self.key_padding[:, : self.length] if self.padded else None
        return self.positions[:, : self.length], pad

    def reorder(self, index: Tensor) -> None:
        """Keep batch rows `index` in every layer (beam search)."""
        self.positions = self.positions.index_select(0, index)
        self.key_padding = self.key_padding.index_select(0, index)
        for layer in self.layers:
            layer.reorder(index)
        for cross in self.cross or []:
            cross.reorder(index)

    def memory_bytes(self) -> int:
        """Bytes held by key/value buffers."""
        total = sum(c.k.numel() * c.k.element_size() * 2 for c in self.layers)
        for c in self.cross or []:
            if c.k is not None:
                total += c.k.numel() * c.k.element_size() * 2
        return total
