"""flash-linear-attention's gated delta rule (Triton, CUDA), for gated_deltanet."""

from __future__ import annotations

from types import ModuleType

from torch import Tensor

from archzoo.parts.mixer_kernels import mixer_kernel

from .common import no_documents


@mixer_kernel(
    "fla_gated_delta_rule",
    op="gated_delta_rule",
    library="fla.ops.gated_delta_rule",
    refuses=no_documents,
)
def fla_gated_delta_rule(
    lib: ModuleType,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    log_decay: Tensor,
    beta: Tensor,
    state: Tensor | None,
) -> tuple[Tensor, Tensor]:
    """flash-linear-attention's chunked (prefill) and fused recurrent (one token) delta rule"""
    # q, k (B, H, T, dk) already normalised and scaled; FLA takes tokens before heads
    run = lib.fused_recurrent_gated_delta_rule if q.shape[2] == 1 else lib.chunk_gated_delta_rule
    o, state = run(
        q.transpose(1, 2),
        k.transpose(1, 2),
        v.to(q.dtype).transpose(1, 2),  # (B, T, H, dv)
        g=log_decay.transpose(1, 2),  # (B, T, H)
        beta=beta.transpose(1, 2),
        scale=1.0,
        initial_state=state,
        output_final_state=True,
    )
    return o.transpose(1, 2), state  # (B, H, T, dv), (B, H, dk, dv)
