"""mamba-ssm's SSD chunk scan and state update (Triton, CUDA), for mamba2."""

from __future__ import annotations

import importlib
from types import ModuleType

from torch import Tensor

from archzoo.parts.mixer_kernels import mixer_kernel

from .common import no_documents


@mixer_kernel("mamba_ssm_ssd", op="ssd", library="mamba_ssm", refuses=no_documents)
def mamba_ssm_ssd(
    lib: ModuleType,
    x: Tensor,
    dt: Tensor,
    A: Tensor,
    b: Tensor,
    c: Tensor,
    state: Tensor | None,
    chunk: int,
) -> tuple[Tensor, Tensor]:
    """mamba-ssm's mamba_chunk_scan_combined (prefill) and selective_state_update (one token)"""
    # x (B, H, T, P); dt (B, H, T) after softplus, clamp and padding; b, c (B, T, G, N)
    B, H, T, P = x.shape
    N = b.shape[-1]
    if state is not None:
        state = state.transpose(-1, -2).contiguous()  # mamba-ssm keeps (B, H, P, N)
    if T == 1:
        ops = importlib.import_module(lib.__name__ + ".ops.triton.selective_state_update")
        if state is None:
            state = x.new_zeros(B, H, P, N)
        y = ops.selective_state_update(
            state,  # updated in place
            x[:, :, 0],  # (B, H, P)
            dt[:, :, 0, None].expand(B, H, P),
            A[:, None, None].expand(H, P, N),
            b[:, 0],  # (B, G, N)
            c[:, 0],
        )[:, :, None]  # (B, H, 1, P)
        return y, state.transpose(-1, -2)
    ops = importlib.import_module(lib.__name__ + ".ops.triton.ssd_combined")
    y, state = ops.mamba_chunk_scan_combined(
        x.transpose(1, 2),  # (B, T, H, P)
        dt.transpose(1, 2),  # (B, T, H)
        A,
        b,
        c,
        chunk,
        initial_states=state,
        return_final_states=True,
    )
    return y.transpose(1, 2), state.transpose(-1, -2)  # (B, H, T, P), (B, H, N, P)
