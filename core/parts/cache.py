"""Static caches for incremental decoding, allocated once and written in place: keys and
values of an attention layer (`LayerCache`), or the recurrent state of a mixer layer
(`StateCache`: a convolution window and an SSM or delta-rule state), or both side by side
for a layer whose mixers run in parallel (`PartsCache`), one per layer of a stack's
`KVCache`."""

from __future__ import annotations

import torch
from torch import Tensor


class LayerCache:
    """Keys and values of one self-attention layer: (B, Hkv, capacity, hd).

    Values may have their own (heads, width) (`value_shape`): a latent attention stores its
    compressed latent as the keys and its shared rotary key as the values.

    Without a window, keys are stored in order and `append` returns all of them. With a
    `window`, the layer keeps only the newest `window` keys in a ring buffer (`index` is each
    slot's sequence index, -1 when empty; `valid` is False for padding) and uses `extend`.
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
        value_shape: tuple[int, int] | None = None,
    ) -> None:
        v_heads, v_dim = value_shape or (n_kv_heads, head_dim)
        # without a window only written slots are read; a ring's empty slots are read (masked),
        # so they must hold finite numbers
        alloc = torch.empty if window is None else torch.zeros
        self.k = alloc(batch, n_kv_heads, capacity, head_dim, dtype=dtype, device=device)
        self.v = alloc(batch, v_heads, capacity, v_dim, dtype=dtype, device=device)
        self.window = window
        self.capacity = capacity
        self.length = 0  # tokens seen so far (may exceed capacity with a window)
        self.index = torch.full((capacity,), -1, dtype=torch.long, device=device)
        self.valid = torch.zeros(batch, capacity, dtype=torch.bool, device=device)

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Store new keys/values (B, Hkv, T, hd); return every stored one (no window)."""
        t, start = k.shape[2], self.length
        if start + t > self.capacity:
            raise ValueError(
                f"KV cache holds {self.capacity} tokens; cannot add {t} more after {start}"
            )
        self.k.narrow(2, start, t).copy_(k)  # narrow: the cheapest view to write through
        self.v.narrow(2, start, t).copy_(v)
        self.length = start + t
        return self.k.narrow(2, 0, self.length), self.v.narrow(2, 0, self.length)

    def extend(
        self, k: Tensor, v: Tensor, index: Tensor, valid: Tensor
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Window caches: stored keys then the new ones (B, Hkv, S + T, hd), their sequence
        indices (S + T,) and validity (B, S + T); afterwards only the newest `window` stay.

        index (T,) and valid (B, T) are the new tokens' sequence indices and padding flags
        (the attention mask's `query_positions()` and `query_valid(B)`).
        """
        keys, values = torch.cat([self.k, k], dim=2), torch.cat([self.v, v], dim=2)
        all_index = torch.cat([self.index, index])
        all_valid = torch.cat([self.valid, valid], dim=1)
        self.store(k, v, index, valid)
        return keys, values, all_index, all_valid

    def store(self, k: Tensor, v: Tensor, index: Tensor, valid: Tensor) -> None:
        """Write the newest min(T, window) of the new keys into their ring slots."""
        t = k.shape[2]
        keep = min(t, self.capacity)
        index_new = index[t - keep :]
        slots = index_new % self.capacity
        self.k[:, :, slots] = k[:, :, t - keep :]
        self.v[:, :, slots] = v[:, :, t - keep :]
        self.index[slots] = index_new
        self.valid[:, slots] = valid[:, t - keep :]
        self.length += t

    def reorder(self, index: Tensor) -> None:
        """Keep batch rows `index` (beam search)."""
        self.k, self.v = self.k.index_select(0, index), self.v.index_select(0, index)
        self.valid = self.valid.index_select(0, index)

    def reset(self) -> None:
        """Forget every stored token (the buffers stay)."""
        self.length = 0
        self.index.fill_(-1)
        self.valid.fill_(False)

    def buffer(self) -> Tensor:
        """A tensor in the dtype and on the device the cache was made for (its keys)."""
        return self.k

    def memory_bytes(self) -> int:
        """Bytes held by the key and value buffers."""
        return (self.k.numel() + self.v.numel()) * self.k.element_size()


StateShapes = dict[str, tuple[tuple[int, ...], torch.dtype | None]]  # name -> (shape, dtype)


class StateCache:
    """One mixer layer's decoding state: named tensors (B, ...), zeros before the first
    token, updated in place by the mixer. `shapes` (the mixer's `state_shapes()`) gives each
    one's per-row shape and dtype (None: the model's `dtype`); the first is in that dtype."""

    def __init__(
        self, shapes: StateShapes, batch: int, *, dtype: torch.dtype, device: torch.device
    ) -> None:
        self.dtype = dtype
        self.reference = torch.empty(0, dtype=dtype, device=device)  # what it was made for
        self.tensors = {
            name: torch.zeros(batch, *shape, dtype=own or dtype, device=device)
            for name, (shape, own) in shapes.items()
        }

    def reset(self) -> None:
        """Back to the state before any token."""
        for t in self.tensors.values():
            t.zero_()

    def reorder(self, index: Tensor) -> None:
        """Keep batch rows `index` (beam search)."""
        self.tensors = {name: t.index_select(0, index) for name, t in self.tensors.items()}

    def buffer(self) -> Tensor:
        """A tensor in the dtype and on the device the cache was made for."""
        return self.reference

    def memory_bytes(self) -> int:
        """Bytes held by the state tensors."""
        return sum(t.numel() * t.element_size() for t in self.tensors.values())


class PartsCache:
    """The caches of a layer whose token mixers run side by side (`Attention.cache_parts`):
    one LayerCache or StateCache per mixer, in the mixers' order."""

    def __init__(self, parts: list[LayerCache | StateCache | PartsCache]) -> None:
        self.parts = parts

    def reset(self) -> None:
        for part in self.parts:
            part.reset()

    def reorder(self, index: Tensor) -> None:
        """Keep batch rows `index` in every part (beam search)."""
        for part in self.parts:
            part.reorder(index)

    def buffer(self) -> Tensor:
        """A tensor in the dtype and on the device the cache was made for (its first part's)."""
        return self.parts[0].buffer()

    def memory_bytes(self) -> int:
        return sum(part.memory_bytes() for part in self.parts)


class CrossCache:
    """Cross-attention keys/values, computed from the encoder output once per generation."""

    def __init__(self) -> None:
        self.k: Tensor | None = None
        self.v: Tensor | None = None

    def reorder(self, index: Tensor) -> None:
        if self.k is not None:
            self.k, self.v = self.k.index_select(0, index), self.v.index_select(0, index)


class KVCache:
    """Every layer's cache for one stack (a LayerCache or, for a recurrent mixer, a
    StateCache, or a PartsCache of both), plus the positions and padding of cached tokens."""

    def __init__(
        self,
        layers: list[LayerCache | StateCache | PartsCache],
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

    def reset(self) -> None:
        """Forget every cached self-attention token (buffers kept; cross-attention memory too)."""
        self.length, self.padded = 0, False
        self.key_padding.fill_(True)
        for layer in self.layers:
            layer.reset()

    def reorder(self, index: Tensor) -> None:
        """Keep batch rows `index` in every layer (beam search)."""
        self.positions = self.positions.index_select(0, index)
        self.key_padding = self.key_padding.index_select(0, index)
        for layer in self.layers:
            layer.reorder(index)
        for cross in self.cross or []:
            cross.reorder(index)

    def memory_bytes(self) -> int:
        """Bytes held by key/value buffers and recurrent states."""
        total = sum(layer.memory_bytes() for layer in self.layers)
        for c in self.cross or []:
            if c.k is not None:
                total += c.k.numel() * c.k.element_size() * 2
        return total
