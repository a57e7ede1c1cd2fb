"""Per-expert checkpoint tensors <-> archzoo's stacked expert tensors.

Published MoE checkpoints store one (F, D) or (D, F) matrix per expert and projection
(`experts.{e}.w1`, ...); archzoo's `moe` holds each projection of all experts as one stacked
tensor. Import stacks them into transformers 5's fused names (`mlp.experts.gate_up_proj`
(E, 2F, D) and `mlp.experts.down_proj` (E, D, F)), which the tensor table then maps; export
splits them back into the per-expert layout.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import Tensor

from archzoo.parts.converter import TensorSource

FUSED_IN, FUSED_OUT = "mlp.experts.gate_up_proj", "mlp.experts.down_proj"


@dataclass(frozen=True)
class PerExpert:
    """Names, relative to `layers.{i}.`, of one expert's gate, up and down weights."""

    gate: str  # e.g. "block_sparse_moe.experts.{e}.w1.weight"
    up: str
    down: str

    @classmethod
    def under(cls, expert: str, gate: str, up: str, down: str) -> PerExpert:
        """The weights of modules `gate`, `up`, `down` under `expert` (holding `{e}`)."""
        return cls(f"{expert}.{gate}.weight", f"{expert}.{up}.weight", f"{expert}.{down}.weight")

    def stack(self, src: TensorSource, prefix: str) -> None:
        """Add fused (E, 2F, D) / (E, D, F) tensors for every layer that has per-expert ones."""
        pattern = re.compile(re.escape(prefix) + r"layers\.(\d+)\." + _regex(self.down) + "$")
        layers = sorted({int(m.group(1)) for n in src.names() if (m := pattern.match(n))})
        for i in layers:
            lead = f"{prefix}layers.{i}."
            gate, up, down = ([] for _ in range(3))
            e = 0
            while src.has(lead + self.down.format(e=e)):
                for part, out in ((self.gate, gate), (self.up, up), (self.down, down)):
                    name = lead + part.format(e=e)
                    out.append(src.take(name))
                e += 1
            src.add(lead + FUSED_IN, torch.cat([torch.stack(gate), torch.stack(up)], dim=1))
            src.add(lead + FUSED_OUT, torch.stack(down))

    def split(self, tensors: Mapping[str, Tensor]) -> dict[str, Tensor]:
        """The per-expert layout of an export: fused expert tensors replaced by one per expert."""
        out: dict[str, Tensor] = {}
        for name, t in tensors.items():
            if name.endswith(FUSED_IN):
                lead = name[: -len(FUSED_IN)]
                gate, up = t.chunk(2, dim=1)  # (E, F, D) each
                for e in range(t.shape[0]):
                    out[lead + self.gate.format(e=e)] = gate[e].contiguous()
                    out[lead + self.up.format(e=e)] = up[e].contiguous()
            elif name.endswith(FUSED_OUT):
                lead = name[: -len(FUSED_OUT)]
                for e in range(t.shape[0]):
                    out[lead + self.down.format(e=e)] = t[e].contiguous()
            else:
                out[name] = t
        return out


def stack_numbered(src: TensorSource, per_expert: re.Pattern[str]) -> None:
    """Tensors named `{lead}expert_{e}.{part}` (`per_expert` matches lead, e and part) stacked
    into one (E, ...) tensor `{lead}{part}` each, experts in order (Switch's, NLLB-MoE's)."""
    groups: dict[tuple[str, str], dict[int, str]] = {}
    for name in src.names():
        if (m := per_expert.match(name)) is not None:
            groups.setdefault((m.group(1), m.group(3)), {})[int(m.group(2))] = name
    for (lead, part), by_expert in groups.items():
        src.add(lead + part, torch.stack([src.take(by_expert[e]) for e in sorted(by_expert)]))


def split_numbered(tensors: Mapping[str, Tensor], stacked: re.Pattern[str]) -> dict[str, Tensor]:
    """The inverse of `stack_numbered` for an export: each (E, ...) tensor `{lead}{part}`
    (`stacked` matches lead and part) written back as `{lead}expert_{e}.{part}`."""
    out: dict[str, Tensor] = {}
    for name, t in tensors.items():
        if (m := stacked.match(name)) is None:
            out[name] = t
            continue
        for e in range(t.shape[0]):
            out[f"{m.group(1)}expert_{e}.{m.group(2)}"] = t[e].contiguous()
    return out


# Qwen3-MoE's and DeepSeek-V3's per-expert names
GATE_UP_DOWN_PROJ = PerExpert.under("mlp.experts.{e}", "gate_proj", "up_proj", "down_proj")


def _regex(template: str) -> str:
    return re.escape(template).replace(re.escape("{e}"), r"\d+")
