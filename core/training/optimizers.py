"""The optimizers `zoo train --optimizer` names: AdamW alone, or Muon beside AdamW.

Muon (Jordan et al., 2024; Liu et al., 2025, "Muon is Scalable for LLM Training")
orthogonalises the momentum of a weight matrix by Newton-Schulz iterations. It is meant for
the hidden matrices: the 2-D weights inside the blocks (attention and FFN projections,
routers). Embeddings, position tables, output heads, norms and biases stay with AdamW, as
the papers prescribe. torch.optim.Muon runs with `adjust_lr_fn="match_rms_adamw"`
(Moonshot's 0.2 * sqrt(max(A, B)) scaling), so both share --lr and --weight-decay.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from ..model.builder import hidden_matrix_names
from ..parts.interfaces import Norm
from ..specs.mup import mup_param_groups, width_ratio
from .config import OPTIMIZERS

MUON_MOMENTUM = 0.95  # Muon's Nesterov momentum (torch's default and the papers')
MUON_LR_ADJUST = "match_rms_adamw"


def norm_parameters(model: nn.Module) -> set[int]:
    """ids of the parameters of norm layers (gains and shifts, some of them 2-D: per head)."""
    return {id(p) for m in model.modules() if isinstance(m, Norm) for p in m.parameters()}


def muon_parameters(model: nn.Module) -> list[nn.Parameter]:
    """The hidden matrices Muon updates: 2-D weights inside the blocks of every stack, except
    those of norm layers."""
    base = getattr(model, "module", model)  # DDP wraps the model
    norms = norm_parameters(base)
    found: dict[int, nn.Parameter] = {}
    for stack in (getattr(base, "encoder", None), getattr(base, "decoder", None)):
        if stack is None:
            continue
        for p in stack.blocks.parameters():
            if p.dim() == 2 and id(p) not in norms:
                found.setdefault(id(p), p)  # shared blocks: once
    return list(found.values())


def adamw_groups(
    params: list[nn.Parameter], weight_decay: float, norms: set[int]
) -> list[dict[str, Any]]:
    """AdamW's groups: weight decay on matrices only (not on biases or norm gains, `norms`)."""
    decay = [p for p in params if p.dim() >= 2 and id(p) not in norms]
    mine = {id(p) for p in decay}
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": [p for p in params if id(p) not in mine], "weight_decay": 0.0},
    ]


def adamw(groups: list[dict[str, Any]], lr: float, betas: tuple[float, float]) -> torch.optim.AdamW:
    """torch's AdamW, with its fused kernel where every parameter is a plain CPU or CUDA
    float tensor (the per-tensor loop's update up to rounding, a few times faster on a CPU);
    sharded (FSDP2) or other parameters take the default implementation."""
    params = [p for g in groups for p in g["params"]]
    fused = all(
        type(p.data) is torch.Tensor and p.device.type in ("cpu", "cuda") and p.is_floating_point()
        for p in params
    )
    return torch.optim.AdamW(groups, lr=lr, betas=betas, fused=fused or None)


def make_optimizers(model: nn.Module, cfg: Any, spec: Any = None) -> list[torch.optim.Optimizer]:
    """[AdamW] for --optimizer adamw (muP's groups under the spec's muP, core/specs/mup.py);
    [Muon, AdamW] for muon (Muon first)."""
    betas = (cfg.beta1, cfg.beta2)
    name = getattr(cfg, "optimizer", "adamw")
    mup = spec is not None and spec.data.get("mup")
    if name not in OPTIMIZERS:
        raise ValueError(f"--optimizer {name!r}: expected one of {', '.join(OPTIMIZERS)}")
    if mup and name == "muon":
        raise ValueError(
            "--optimizer muon with muP (mup.base_width): muP's per-layer learning rates are "
            "Adam's (Tensor Programs V); use --optimizer adamw, or leave muP out"
        )
    if mup:
        inner = getattr(model, "module", model)  # DDP wraps the model
        hidden = hidden_matrix_names(spec, inner)
        groups = mup_param_groups(inner, hidden, width_ratio(spec.data), cfg.lr, cfg.weight_decay)
        return [adamw(groups, cfg.lr, betas)]
    norms = norm_parameters(model)
    if name == "adamw":
        groups = adamw_groups(list(model.parameters()), cfg.weight_decay, norms)
        return [adamw(groups, cfg.lr, betas)]
    hidden = muon_parameters(model)
    mine = {id(p) for p in hidden}
    rest = [p for p in model.parameters() if id(p) not in mine]
    muon = torch.optim.Muon(
        hidden,
        lr=cfg.lr,
        weight_decay=cfg.weight_decay,
        momentum=MUON_MOMENTUM,
        adjust_lr_fn=MUON_LR_ADJUST,
    )
    rest_opt = adamw(adamw_groups(rest, cfg.weight_decay, norms), cfg.lr, betas)
    return [muon, rest_opt]


class Optimizers:
    """One or more optimizers stepped together, each with the same learning-rate schedule."""

    def __init__(
        self, optimizers: list[torch.optim.Optimizer], factor: Callable[[int], float]
    ) -> None:
        self.optimizers = optimizers
        self.schedulers = [torch.optim.lr_scheduler.LambdaLR(o, factor) for o in optimizers]

    @property
    def lr(self) -> float:
        """The learning rate of this step (the same in every optimizer)."""
        return self.optimizers[0].param_groups[0]["lr"]

    @property
    def param_groups(self) -> list[dict[str, Any]]:
        return [g for o in self.optimizers for g in o.param_groups]

    def step(self) -> None:
        """Update the weights, then advance the schedule."""
        for o in self.optimizers:
            o.step()
        for s in self.schedulers:
            s.step()

    def zero_grad(self) -> None:
        for o in self.optimizers:
            o.zero_grad(set_to_none=True)

    def scheduler_states(self) -> Any:
        """The schedules' state: one dict for one optimizer (the format before Muon), else a
        list of them."""
        states = [s.state_dict() for s in self.schedulers]
        return states[0] if len(states) == 1 else states

    def load_scheduler_states(self, states: Any) -> None:
        """Restore what `scheduler_states` gave; a count that does not fit is a ValueError."""
        states = [states] if isinstance(states, dict) else states
        if not isinstance(states, list) or len(states) != len(self.schedulers):
            raise ValueError(
                f"expected {len(self.schedulers)} learning-rate schedule state(s), "
                f"got {str(states)[:80]}"
            )
        for s, state in zip(self.schedulers, states, strict=True):
            s.load_state_dict(state)
