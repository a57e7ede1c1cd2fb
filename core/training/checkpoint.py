"""Training checkpoints as one safetensors file: model, optimizer, scheduler and data position.

Full (unsharded) state dicts come from torch.distributed.checkpoint's state_dict helpers, so a
plain, DDP or FSDP2 model writes the same file and can resume under either.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)

from ..io.safe_read import SafetensorsFile, UnreadableSafetensors
from ..io.safe_write import write_safetensors
from .optimizers import Optimizers

FORMAT = "archzoo-train-1"
CHECKPOINT = "checkpoint.safetensors"
FULL = StateDictOptions(full_state_dict=True, cpu_offload=True)


def full_model_state(model: nn.Module) -> dict[str, torch.Tensor]:
    """The whole model's tensors on CPU (gathered across ranks under FSDP; rank 0 gets them)."""
    return get_model_state_dict(model, options=FULL)


def save_checkpoint(
    path: Path,
    model: nn.Module,
    opts: Optimizers,
    *,
    step: int,
    info: dict[str, Any],
    write: bool,
) -> None:
    """Write the training state at `step` atomically (every rank must call; `write` on one).
    The optimizer's name is in `info`'s config and in the metadata."""
    model_sd = full_model_state(model)
    optim_sd = get_optimizer_state_dict(model, opts.optimizers, options=FULL)
    if not write:
        return
    tensors = {f"model.{k}": v.detach().contiguous().clone() for k, v in model_sd.items()}
    for fqn, state in optim_sd["state"].items():
        for key, value in state.items():
            t = value if torch.is_tensor(value) else torch.tensor(value)
            tensors[f"optim.{fqn}.{key}"] = t.detach().contiguous().clone()
    metadata = {
        "format": FORMAT,
        "step": str(step),
        "info": json.dumps(info),
        "param_groups": json.dumps(optim_sd["param_groups"]),
        "scheduler": json.dumps(opts.scheduler_states()),
        "optimizer": str(info["config"].get("optimizer", "adamw")),
    }
    write_safetensors(path, tensors, metadata)  # atomic, no NumPy needed


def read_info(path: Path) -> tuple[int, dict[str, Any]]:
    """The step and run description stored in a checkpoint, without loading tensors."""
    with _open(path) as f:
        meta = f.metadata
    if meta.get("format") != FORMAT:
        raise ValueError(f"{path}: not an archzoo training checkpoint")
    try:
        step, info = int(meta["step"]), json.loads(meta["info"])
    except (KeyError, ValueError) as exc:
        raise ValueError(f"{path}: damaged training checkpoint (step or info: {exc})") from None
    if (
        step < 0
        or not isinstance(info, dict)
        or not all(isinstance(info.get(k), dict) for k in ("spec", "config"))
    ):
        raise ValueError(
            f"{path}: damaged training checkpoint (expected a step >= 0 and an info object with "
            f"spec and config, got step {step} and info {str(info)[:80]})"
        )
    return step, info


def _open(path: Path) -> SafetensorsFile:
    try:
        return SafetensorsFile(path)
    except UnreadableSafetensors as exc:
        raise ValueError(f"{path}: not a readable checkpoint ({exc})") from None


def load_checkpoint(path: Path, model: nn.Module, opts: Optimizers) -> int:
    """Restore model, optimizer and scheduler in place; returns the step to continue after.

    A file whose tensors or optimizer/scheduler state do not fit the run is a ValueError
    naming it (torch would restore a missing model tensor silently from the fresh model).
    Tensors are read into memory through one handle: nothing keeps the file mapped, so the
    next save's replace frees its disk space."""
    try:
        return _load_checkpoint(path, model, opts)
    except (KeyError, TypeError, AttributeError, RuntimeError, json.JSONDecodeError) as exc:
        text = " ".join(str(exc).split())[:200] or type(exc).__name__
        raise ValueError(f"{path}: damaged training checkpoint ({text})") from None


def _load_checkpoint(path: Path, model: nn.Module, opts: Optimizers) -> int:
    model_sd: dict[str, torch.Tensor] = {}
    optim_state: dict[str, dict[str, torch.Tensor]] = {}
    with _open(path) as f:
        meta = f.metadata
        for name in f.keys():  # noqa: SIM118 - a file, not a mapping
            part, _, rest = name.partition(".")
            if part == "model":
                model_sd[rest] = _read(f, name)
            elif part == "optim" and "." in rest:
                fqn, key = rest.rsplit(".", 1)
                optim_state.setdefault(fqn, {})[key] = _read(f, name)
            else:
                raise ValueError(f"{path}: damaged training checkpoint (tensor {name!r})")
    expected = set(get_model_state_dict(model))  # names only: nothing is gathered
    missing, unexpected = sorted(expected - model_sd.keys()), sorted(model_sd.keys() - expected)
    unexpected += sorted(f"optim.{k}" for k in optim_state.keys() - expected)
    if int(meta["step"]) > 0 and not optim_state:
        missing.append("optim.* (the optimizer state)")
    if missing or unexpected:
        raise ValueError(
            f"{path}: damaged training checkpoint (model tensors missing: {missing[:3]}, "
            f"unexpected: {unexpected[:3]})"
        )
    set_model_state_dict(model, model_sd, options=StateDictOptions(full_state_dict=True))
    groups = json.loads(meta["param_groups"])
    sizes = [len(g["params"]) for g in opts.param_groups]
    if (
        not isinstance(groups, list)
        or [len(g.get("params", ())) if isinstance(g, dict) else None for g in groups] != sizes
    ):
        raise ValueError(
            f"{path}: damaged training checkpoint (expected {len(sizes)} optimizer parameter "
            f"groups of {sizes} parameters, got {str(groups)[:80]})"
        )
    optim_sd = {"state": optim_state, "param_groups": groups}
    set_optimizer_state_dict(
        model, opts.optimizers, optim_sd, options=StateDictOptions(full_state_dict=True)
    )
    try:
        opts.load_scheduler_states(json.loads(meta["scheduler"]))
    except ValueError as exc:
        raise ValueError(f"{path}: damaged training checkpoint ({exc})") from None
    return int(meta["step"])


def _read(f: SafetensorsFile, name: str) -> torch.Tensor:
    try:
        return f.read(name)
    except (UnreadableSafetensors, OSError) as exc:
        raise ValueError(f"{f.path}: not a readable checkpoint ({exc})") from None
