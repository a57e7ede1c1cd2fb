"""The tensor half of a converter table: HF tensor names <-> archzoo names, in both directions.

A `Rule` pairs HF name templates with archzoo name templates and a `Transform`. Templates
use `{i}` for the block index and `{s}` (archzoo side) for the stack; the HF side may use
any variable of its stack (`TensorTable.stacks`). Which rules apply is decided by the
archzoo model itself: a rule expands over the archzoo names the model has, so an optional
bias, a fused or separate q|k|v, or a tied head needs no code in the converter.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from torch import Tensor, nn

from .hf_transforms import IDENTITY, Transform, named
from .tensor_source import ConversionError, TensorSource

PARAMS = ("weight", "bias")


@dataclass(frozen=True)
class Rule:
    """HF tensors (`a|b`: the first present of aliases) <-> archzoo tensors, by `transform`."""

    hf: tuple[str, ...]
    zoo: tuple[str, ...]
    transform: Transform = IDENTITY
    base: bool = True  # under the base-model prefix (False: a task head's own tensors)

    def __post_init__(self) -> None:
        if len(self.hf) != self.transform.n_hf or len(self.zoo) != self.transform.n_zoo:
            raise ValueError(f"rule {self.hf} -> {self.zoo} does not fit {self.transform}")


def parse_rules(text: str, paths: Mapping[str, str], *, base: bool = True) -> tuple[Rule, ...]:
    """Rules from a text table, one per line: `HF-NAME  PATH[,PATH]  [transform] [tensor]`.

    `a.(q,k,v)` names several HF modules: with as many PATHs they pair up (`a.(q,k) Q,K`:
    a.q -> Q, a.k -> K), with one PATH they form one rule (`fuse`). `x|y` are
    aliases of one tensor (the first present is read). PATH is a name from `paths`
    (archzoo's paths, named once). A module rule covers `.weight` and `.bias`; `tensor`
    makes the names whole tensor names. `#` starts a comment.
    """
    rules: list[Rule] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#")[0].strip()
        if not line:
            continue
        hf, zoo, *flags = line.split()
        try:
            zoo_paths = [paths[z] for z in zoo.split(",")]
            kind = next((f for f in flags if f != "tensor"), None)
            hf_names = _group(hf)
            if len(hf_names) == len(zoo_paths) > 1:  # pairwise, each by `kind`
                pairs = [([h], [z]) for h, z in zip(hf_names, zoo_paths, strict=True)]
            else:
                pairs = [(hf_names, zoo_paths)]
            transforms = [named(kind, len(h), len(z)) for h, z in pairs]
        except (KeyError, ValueError) as exc:
            raise ValueError(f"converter table line {number} {line!r}: {exc}") from None
        for p in ("",) if "tensor" in flags else PARAMS:
            dot = f".{p}" if p else ""
            for (h, z), transform in zip(pairs, transforms, strict=True):
                hf_t = tuple("|".join(a + dot for a in n.split("|")) for n in h)
                rules.append(Rule(hf_t, tuple(n + dot for n in z), transform, base))
    return tuple(rules)


def _group(name: str) -> list[str]:
    """'a.(q,k,v).w' -> ['a.q.w', 'a.k.w', 'a.v.w']; a name without a group as it is."""
    m = re.search(r"\(([^)]*)\)", name)
    if m is None:
        return [name]
    return [name[: m.start()] + part + name[m.end() :] for part in m.group(1).split(",")]


@dataclass(frozen=True)
class ZooNames:
    """The archzoo tensor names of a model: those holding a tensor, and tied repeats of them."""

    canonical: tuple[str, ...]
    aliases: frozenset[str]

    @classmethod
    def of(cls, model: nn.Module) -> ZooNames:
        first: dict[int, str] = {}
        canonical, aliases = [], set()
        for name, t in model.state_dict(keep_vars=True).items():
            if id(t) in first:
                aliases.add(name)
            else:
                first[id(t)] = name
                canonical.append(name)
        return cls(tuple(canonical), frozenset(aliases))


@dataclass(frozen=True)
class TensorTable:
    """Every tensor of an HF type, its base-model prefixes and the HF tensors never used."""

    rules: tuple[Rule, ...]
    prefixes: tuple[str, ...] = ("",)  # base-model prefixes, e.g. ("bert.", ""): headless last
    stacks: Mapping[str, Mapping[str, str]] = field(default_factory=lambda: {"decoder": {}})
    ignore: tuple[str, ...] = ()  # buffers and unused heads: HF name templates, any prefix

    def prefix(self, names: list[str]) -> str:
        """The first prefix that some HF tensor starts with (the last one otherwise)."""
        for p in self.prefixes:
            if p and any(n.startswith(p) for n in names):
                return p
        return self.prefixes[-1]

    def expand(self, names: ZooNames, prefix: str) -> Iterator[tuple[Rule, list[str], list[str]]]:
        """(rule, HF names, archzoo names) for every place a rule applies in the model."""
        every = sorted(set(names.canonical) | names.aliases)
        for rule in self.rules:
            per_stack = any("{s}" in z for z in rule.zoo)  # else a model-level tensor: once
            for stack, hf_vars in list(self.stacks.items())[: None if per_stack else 1]:
                zoo = [z.replace("{s}", stack) for z in rule.zoo]
                pattern = re.compile(re.escape(zoo[0]).replace(r"\{i\}", r"(\d+)") + "$")
                for name in every:
                    m = pattern.match(name)
                    if m is None:
                        continue
                    i = m.group(1) if m.groups() else ""
                    lead = prefix if rule.base else ""
                    hf = [
                        "|".join(lead + a.format(i=i, **hf_vars) for a in h.split("|"))
                        for h in rule.hf
                    ]
                    yield rule, hf, [z.replace("{i}", i) for z in zoo]

    def to_zoo(self, src: TensorSource, names: ZooNames, ctx: dict[str, Any]) -> dict[str, Tensor]:
        """archzoo tensors from HF ones; absent HF tensors are recorded in `src` by name."""
        out: dict[str, Tensor] = {}
        covered: set[str] = set()
        for rule, hf, zoo in self.expand(names, self.prefix(src.names())):
            covered.update(zoo)
            if all(z in names.aliases for z in zoo):  # a tied copy: archzoo keeps one
                for alternatives in hf:
                    for n in alternatives.split("|"):
                        src.skip_exact(n)
                continue
            ts = [src.take(*h.split("|")) for h in hf]
            for alternatives in hf:  # the other spellings of an alias are known, not extra
                for n in alternatives.split("|")[1:]:
                    src.skip_exact(n)
            if any(t is None for t in ts):
                continue
            out.update(zip(zoo, rule.transform.forward(ts, ctx), strict=True))
        uncovered = [n for n in names.canonical if n not in covered]
        if uncovered:
            raise ConversionError(
                f"{src.where}: the converter table maps no HF tensor to archzoo "
                f"{', '.join(uncovered[:10])}"
            )
        patterns = [re.compile(r"(^|\.)" + _regex(p) + "$") for p in self.ignore]
        for n in src.names():
            if any(p.search(n) for p in patterns):
                src.skip_exact(n)
        return out

    def to_hf(
        self, state: Mapping[str, Tensor], names: ZooNames, ctx: dict[str, Any], prefix: str = ""
    ) -> dict[str, Tensor]:
        """HF tensors from archzoo ones (tied repeats left out, as HF ties them on load; a
        tensor with aliases `a|b` written under each, whichever one HF's tying reads)."""
        if prefix not in self.prefixes:
            raise ConversionError(f"prefix {prefix!r} is not one of {self.prefixes}")
        out: dict[str, Tensor] = {}
        covered: set[str] = set()
        for rule, hf, zoo in self.expand(names, prefix):
            covered.update(zoo)
            if all(z in names.aliases for z in zoo):
                continue
            ts = rule.transform.inverse([state[z] for z in zoo], ctx)
            for alternatives, t in zip(hf, ts, strict=True):  # every spelling HF may read
                out.update(dict.fromkeys(alternatives.split("|"), t))
        uncovered = [n for n in names.canonical if n not in covered]
        if uncovered:
            raise ConversionError(f"no HF name for archzoo tensors {', '.join(uncovered[:10])}")
        return out


def _regex(template: str) -> str:
    """An HF name template as a regex: `{i}` any block index, other variables any name part."""
    escaped = re.escape(template).replace(r"\{i\}", r"\d+")
    return re.sub(r"\\\{\w+\\\}", r"[^.]+", escaped)
