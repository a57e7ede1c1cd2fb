"""A sliding band plus global keys in O(n * w) (Longformer's pattern), without gathers.

A block of `bs` queries starting at position i * bs sees one window of keys, positions
i * bs - half .. i * bs + bs - 1 + half: consecutive rows, so every block's window is one
overlapping strided view of one padded copy of the keys (no per-block gather). One SDPA call
runs every block under a (bs, bs + 2 * half) band mask. Global keys a query sees outside its
band come from a second, small SDPA over the G global keys, and the two softmaxes are merged
by their log-sum-exps. Global query rows are computed densely by the caller.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from archzoo.parts.masks import AttentionMask

_LSE_DTYPES = (torch.float32, torch.float64, torch.bfloat16, torch.float16)
_SDPA_LSE = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)


def band_applies(
    q: Tensor, k: Tensor, v: Tensor, mask: AttentionMask, scoring: dict[str, Any]
) -> bool:
    """The band path computes exactly this call: a band pattern, plain softmax scores, no
    dropout, on the CPU (SDPA with log-sum-exp), no gradient needed through the merge, and
    one document per row."""
    if mask.pattern is None or mask.pattern.band() is None or mask.key_docs is not None:
        return False  # packed rows take the blocked path
    plain = scoring.get("sinks") is None and scoring.get("softcap") is None
    needs_grad = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))
    return (
        plain
        and not scoring.get("dropout_p")
        and not needs_grad
        and q.device.type == "cpu"
        and q.dtype in _LSE_DTYPES
        and _SDPA_LSE is not None
    )


def sdpa_with_lse(
    q: Tensor, k: Tensor, v: Tensor, bias: Tensor, scale: float | None
) -> tuple[Tensor, Tensor]:
    """SDPA under an additive mask, also returning each row's log-sum-exp (N, H, L); a row
    with no visible key gets zeros (its log-sum-exp is then meaningless)."""
    return _SDPA_LSE(q, k, v, attn_mask=bias, scale=scale)


def key_windows(k: Tensor, half: int, bs: int, nb: int, heads: int) -> Tensor:
    """k (B, Hkv, T, hd) -> (B * nb, heads, bs + 2 * half, hd): window b * nb + i holds keys
    i * bs - half .. i * bs + bs - 1 + half of row b (outside 0 .. T - 1 only masked keys).

    One padded copy of the keys: the rows of the batch, each padded to nb * bs, back to back
    with `half` zeros before the first and after the last, so window n starts n * bs rows
    in and every window is one strided view of it, no per-window gather. (Where a window
    reaches into a neighbour row, the mask hides it.)
    """
    B, Hkv, T, hd = k.shape
    Tp = nb * bs
    rows = k.transpose(1, 2)  # (B, T, Hkv, hd)
    if heads != Hkv:
        rows = rows.repeat_interleave(heads // Hkv, dim=2)  # (B, T, H, hd)
    if Tp != T:
        rows = F.pad(rows, (0, 0, 0, 0, 0, Tp - T))  # (B, Tp, H, hd)
    flat = F.pad(rows.reshape(B * Tp, heads, hd), (0, 0, 0, 0, half, half))
    st, sh = flat.stride(0), flat.stride(1)  # flat (half + B * Tp + half, H, hd)
    windows = flat.as_strided((B * nb, bs + 2 * half, heads, hd), (bs * st, st, sh, 1))
    return windows.transpose(1, 2)  # (B * nb, H, W, hd)


def band_bias(
    mask: AttentionMask, half: int, bs: int, nb: int, batch: int, like: Tensor
) -> tuple[Tensor, Tensor]:
    """The windows' additive mask (B * nb, 1, bs, W) and which queries see any key (B|1, Tp):
    within the band, inside the sequence, real keys, causal when the mask is. Made once per
    forward (every layer with this window shares it)."""
    key = ("band", half, bs, batch, like.dtype, like.device)
    if key not in mask.shared:
        mask.shared[key] = _band_bias(mask, half, bs, nb, batch, like.dtype, like.device)
    return mask.shared[key]


def _band_bias(
    mask: AttentionMask,
    half: int,
    bs: int,
    nb: int,
    batch: int,
    dtype: torch.dtype,
    device: torch.device,
) -> tuple[Tensor, Tensor]:
    T, W = mask.k_len, bs + 2 * half
    a = torch.arange(bs, device=device)[:, None]  # query a of a block is window row a + half
    j = torch.arange(W, device=device)[None, :]
    rel = (j >= a) & (j <= a + 2 * half)  # (bs, W) |q - k| <= half
    if mask.causal:
        rel = rel & (j <= a + half)
    real = mask.key_padding
    if real is None:
        real = torch.ones(1, T, dtype=torch.bool, device=device)
    real = real.to(device=device, dtype=torch.bool)
    real = F.pad(real, (half, nb * bs - T + half))  # (B|1, Tp + 2 * half): keys -half ..
    keep = rel & real.unfold(1, W, bs)[:, :, None, :]  # (B|1, nb, bs, W)
    seen = keep.any(-1).view(-1, nb * bs)  # (B|1, Tp)
    keep = keep.expand(batch, nb, bs, W).reshape(batch * nb, 1, bs, W)
    bias = torch.zeros(keep.shape, dtype=dtype, device=device)
    return bias.masked_fill_(~keep, float("-inf")), seen


def band_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: AttentionMask,
    globals_: Tensor | None,
    *,
    scale: float | None,
) -> Tensor:
    """q (B, H, T, hd), k/v (B, Hkv, T, hd) -> (B, H, T, hd) for a band pattern
    (`pattern.band()`), except global query rows, which the caller fills in. `globals_`:
    global key positions (B, G), -1 for none, or None."""
    (half, rows), bs = mask.pattern.band(), mask.pattern.block
    B, H, T, hd = q.shape
    nb = -(-T // bs)
    Tp = nb * bs
    qt = q.transpose(1, 2)  # (B, T, H, hd)
    if Tp != T:
        qt = F.pad(qt, (0, 0, 0, 0, 0, Tp - T))
    qb = qt.reshape(B * nb, bs, H, hd).transpose(1, 2)  # (B * nb, H, bs, hd)
    kw, vw = (key_windows(t, half, bs, nb, H) for t in (k, v))
    bias, seen = band_bias(mask, half, bs, nb, B, q)
    out, lse = sdpa_with_lse(qb, kw, vw, bias, scale)  # (B * nb, H, bs, hd), (B * nb, H, bs)
    out = out.transpose(1, 2).reshape(B, Tp, H, hd)[:, :T]  # (B, T, H, hd)
    if globals_ is not None:
        lse = lse.transpose(1, 2).reshape(B, Tp, H)[:, :T]  # (B, T, H)
        if mask.key_padding is not None:  # else every query sees at least itself
            lse = lse.masked_fill(~seen[:, :T, None], float("-inf"))
        out = merge_global_keys(q, k, v, mask, out, lse, globals_, half, scale)
    if rows is not None:
        out = out.masked_fill(~rows[:, :, None, None], 0.0)  # queries that see nothing
    return out.transpose(1, 2)  # (B, H, T, hd)


def merge_global_keys(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: AttentionMask,
    out: Tensor,
    lse: Tensor,
    globals_: Tensor,
    half: int,
    scale: float | None,
) -> Tensor:
    """Add the global keys outside each query's band to the band's softmax: out (B, T, H, hd)
    and lse (B, T, H) (-inf: no band key) of the band; globals_ (B, G) positions, -1 none."""
    B, H, T, hd = q.shape
    Hkv = k.shape[1]
    valid = globals_ >= 0  # (B, G)
    pos = globals_.clamp(min=0)
    at = pos[:, None, :, None].expand(B, Hkv, -1, hd)
    gk, gv = (t.gather(2, at).repeat_interleave(H // Hkv, 1) for t in (k, v))  # (B, H, G, hd)
    qpos = torch.arange(T, device=q.device)[:, None]  # (T, 1)
    keep = valid[:, None, :] & ((qpos - pos[:, None, :]).abs() > half)  # (B, T, G)
    if mask.causal:
        keep = keep & (pos[:, None, :] <= qpos)
    if mask.key_padding is not None:
        keep = keep & mask.key_padding.bool().gather(1, pos)[:, None, :]
    bias = torch.zeros(B, 1, T, keep.shape[-1], dtype=q.dtype, device=q.device)
    bias = bias.masked_fill_(~keep[:, None], float("-inf"))  # (B, 1, T, G)
    g_out, g_lse = sdpa_with_lse(q, gk, gv, bias, scale)  # (B, H, T, hd), (B, H, T)
    g_lse = g_lse.transpose(1, 2).masked_fill(~keep.any(-1)[:, :, None], float("-inf"))
    # band share of the merged softmax: e^lse / (e^lse + e^g_lse); NaN (no key at all) -> 0
    share = torch.sigmoid(lse - g_lse)  # (B, T, H)
    if mask.key_padding is not None:  # a query may see no key at all: NaN there
        share = share.nan_to_num(0.0)
    share = share.to(out.dtype)
    return torch.lerp(g_out.transpose(1, 2), out, share[..., None])  # (B, T, H, hd)
