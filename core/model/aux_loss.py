"""Auxiliary training losses that components add (a mixture of experts' load balancing).

A component that declares `Capabilities(aux_loss=True)` records what it needs during forward,
forgets it in `reset_aux_loss()`, and its class pools every instance's records in
`combine_aux_loss(modules, attention_mask) -> (loss, coefficient)`. The model reports the
sum of the pooled losses as `aux_loss` and adds coefficient x loss to `loss`. Modules whose
`aux_loss_pool()` returns the same key pool together (JetMoE's attention and FFN routers over
as many experts: one loss); the first module's class combines the pool.
"""

from __future__ import annotations

from collections.abc import Hashable

from torch import Tensor, nn


def aux_loss_modules(model: nn.Module) -> dict[Hashable, list[nn.Module]]:
    """Modules that add an auxiliary loss, grouped by pool (`aux_loss_pool()`, else their
    class), in model order (shared once)."""
    groups: dict[Hashable, list[nn.Module]] = {}
    for module in model.modules():
        caps = getattr(type(module), "capabilities", None)
        if caps is not None and getattr(caps, "aux_loss", False):
            pool = module.aux_loss_pool() if hasattr(module, "aux_loss_pool") else type(module)
            groups.setdefault(pool, []).append(module)
    return groups


def reset_aux_losses(groups: dict[Hashable, list[nn.Module]]) -> None:
    for modules in groups.values():
        for module in modules:
            module.reset_aux_loss()


def pooled_aux_loss(
    groups: dict[Hashable, list[nn.Module]], attention_mask: Tensor | None
) -> tuple[Tensor | None, Tensor | None]:
    """(the reported aux_loss, the weighted term to add to `loss`), or (None, None)."""
    total = weighted = None
    for modules in groups.values():
        loss, coef = type(modules[0]).combine_aux_loss(modules, attention_mask)
        total = loss if total is None else total + loss
        weighted = coef * loss if weighted is None else weighted + coef * loss
    return total, weighted
