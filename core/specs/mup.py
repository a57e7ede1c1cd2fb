"""muP, the maximal-update parametrisation (Yang et al. 2022, "Tensor Programs V"), for Adam.

A spec with `mup: {base_width: B}` is trained at width ratio r = d_model / B. With r = 1
everything equals the spec's own parametrisation except the attention scale. Parameters are
told apart by which of their dimensions grow with the width (as in the `mup` package's base
shapes): a meta build at twice the width shows them.

| parameter | which | init std | Adam lr | multiplier |
|---|---|---|---|---|
| hidden matrix | both dims grow (q/k/v/o, FFN in/out) | init_std / sqrt(r) | lr / r | 1 |
| vector-like | one dim grows (embeddings, norms, biases, readout) | init_std | lr | 1 |
| finite | no dim grows (relative-position tables) | init_std | lr | 1 |
| readout | the LM / MLM head's vocabulary projection | init_std | lr | logits x 1 / r |

Attention scores use 1 / head_dim instead of 1 / sqrt(head_dim) (Tensor Programs V:
with head_dim growing, q.k grows like head_dim once q and k correlate). AdamW's decoupled
weight decay of a hidden matrix is multiplied by r, so lr x weight_decay stays as at the base
width (the `mup` package's MuAdamW does the same).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

MUP_SCORE_EXPONENT = 1.0  # scores x head_dim ** -1 (standard: ** -0.5)
STANDARD_SCORE_EXPONENT = 0.5
WIDENED = ("d_model", "d_ff", "head_dim")  # the sizes that grow with the width


def width_ratio(data: dict[str, Any]) -> float:
    """r = d_model / base_width of a resolved spec (or stack config); 1.0 without muP."""
    mup = data.get("mup")
    return data["d_model"] / mup["base_width"] if mup else 1.0


def mup_dims(cfg: dict[str, Any]) -> dict[str, float]:
    """The Dims values muP sets for a stack config: score exponent and output multiplier."""
    if not cfg.get("mup"):
        return {}
    return {"score_exponent": MUP_SCORE_EXPONENT, "output_multiplier": 1.0 / width_ratio(cfg)}


def widened_source(source: dict[str, Any], factor: int = 2) -> dict[str, Any]:
    """Spec source data (derived sizes null, as `Spec.source_data()` gives) at `factor` times
    the width: d_model, and d_ff / head_dim where the spec sets them, in every stack section."""
    out = {k: (dict(v) if isinstance(v, dict) else v) for k, v in source.items()}
    sections = [out] + [out[s] for s in ("encoder", "decoder") if isinstance(out.get(s), dict)]
    for section in sections:
        for key in WIDENED:
            if isinstance(section.get(key), int):
                section[key] = section[key] * factor
    return out


def hidden_matrices(model: nn.Module, wide: nn.Module) -> list[str]:
    """Names of the parameters of which at least two dimensions grow between `model` and
    `wide` (the same spec built wider): muP's hidden matrices."""
    wide_shapes = {name: p.shape for name, p in wide.named_parameters()}
    names = []
    for name, p in model.named_parameters():
        other = wide_shapes.get(name)
        if other is None or len(other) != p.dim():
            raise ValueError(f"mup: parameter {name!r} has no counterpart in a wider build")
        if sum(a != b for a, b in zip(p.shape, other, strict=True)) >= 2:
            names.append(name)
    return names


@torch.no_grad()
def scale_hidden_init(model: nn.Module, names: list[str], ratio: float) -> None:
    """Multiply each hidden matrix by 1 / sqrt(r): its init std becomes init_std / sqrt(r)."""
    params = dict(model.named_parameters())
    for name in names:
        params[name].mul_(ratio**-0.5)


def mup_param_groups(
    model: nn.Module, hidden: list[str], ratio: float, lr: float, weight_decay: float
) -> list[dict[str, Any]]:
    """AdamW groups: other matrices at lr with decay, vectors at lr without decay, hidden
    matrices at lr / r (decay x r); the first group has the peak lr. Tied parameters once."""
    hidden_set = set(hidden)
    groups: dict[str, list[nn.Parameter]] = {"hidden": [], "matrix": [], "vector": []}
    for name, p in model.named_parameters():  # named_parameters yields a tied tensor once
        key = "hidden" if name in hidden_set else "matrix" if p.dim() >= 2 else "vector"
        groups[key].append(p)
    return [
        {"params": groups["matrix"], "lr": lr, "weight_decay": weight_decay},
        {"params": groups["vector"], "lr": lr, "weight_decay": 0.0},
        {"params": groups["hidden"], "lr": lr / ratio, "weight_decay": weight_decay * ratio},
    ]
