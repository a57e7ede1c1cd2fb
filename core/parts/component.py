"""The component contract: kind, name, typed config, summary and capability flags."""

from __future__ import annotations

import dataclasses
import decimal
import math
import re
import sys
import types
import typing
from dataclasses import dataclass, field
from typing import Any, ClassVar

from torch import nn

from ..errors import printable
from .kinds import KINDS  # noqa: F401 - re-exported: archzoo.parts.component.KINDS


def param(default: Any, doc: str, **checks: Any) -> Any:
    """A config field with a default, a one-line doc and optional checks (min, max, choices);
    `null="key"`: a null value means the component's parameter `key`, else the stack's."""
    meta = {"doc": doc, **checks}
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda d=default: type(d)(d), metadata=meta)
    return field(default=default, metadata=meta)


def dropout_param(doc: str) -> Any:
    """A dropout-probability field whose null (the default) means the model's `dropout`."""
    return param(None, doc, min=0.0, lt=1.0, null="dropout")


@dataclass(frozen=True)
class Capabilities:
    """What a component can do; the validator checks combinations before anything is built."""

    causal: bool = True  # attention: can run with a causal mask
    bidirectional: bool = True  # attention: can run without one
    cross: bool = False  # attention: can attend to another sequence
    rotate: bool = False  # position: rotates queries and keys
    bias: bool = False  # position: adds a term to attention scores
    embed: bool = False  # position: adds a vector to the token embeddings
    values: bool = False  # position: adds value_bias(state, probs) to the attended values
    accepts_rotate: bool = True  # attention: applies a position's rotation
    accepts_bias: bool = True  # attention: applies a position's score bias
    even_head_dim: bool = False  # needs an even head dimension
    final_norm: bool = False  # block: the stack ends with a norm
    cross_layer: bool = True  # block: can hold a decoder layer's cross-attention
    kv_cache: bool = False  # attention: supports incremental decoding
    streams: bool = False  # attention: reads the predicting streams laid after the tokens
    aux_loss: bool = False  # any: adds an auxiliary training loss (combine_aux_loss)
    generates: bool = False  # head: its logits score the next token, so `generate` can use it
    token_ids: bool = False  # head: forward and hidden_loss take input_ids= (pooling at a token)
    choices: bool = False  # head: inputs are (B, C, T), one sequence per choice (multiple choice)
    mup: bool = (
        False  # attention: scores use dims.score_exponent; head: logits dims.output_multiplier
    )


# The capability flags that mean something for each kind (the comments above); `zoo show`
# and the components page list only these, so a norm does not show attention flags.
KIND_CAPABILITIES: dict[str, tuple[str, ...]] = {
    "attention": (
        "causal",
        "bidirectional",
        "cross",
        "accepts_rotate",
        "accepts_bias",
        "kv_cache",
        "streams",
        "mup",
    ),
    "position": ("rotate", "bias", "embed", "values"),
    "block": ("final_norm", "cross_layer"),
    "head": ("generates", "token_ids", "choices", "mup"),
}
ANY_KIND_CAPABILITIES = ("even_head_dim", "aux_loss")  # flags any kind may declare


def capabilities_of(kind: str) -> tuple[str, ...]:
    """The capability flags that concern components of `kind`, in declaration order."""
    own = {*KIND_CAPABILITIES.get(kind, ()), *ANY_KIND_CAPABILITIES}
    return tuple(f.name for f in dataclasses.fields(Capabilities) if f.name in own)


@dataclass
class Config:
    """Base of every component config; subclasses add fields made with `param`."""


class Component(nn.Module):
    """Base of every registered component: a module with a kind, a name and a typed config."""

    kind: ClassVar[str] = ""
    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    Config: ClassVar[type] = Config
    capabilities: ClassVar[Capabilities] = Capabilities()

    def __init_subclass__(cls, *, name: str | None = None, **flags: bool) -> None:
        """Declare a component in its class line, `class X(Norm, name="x", kv_cache=True):`:
        `name`, capability flags over the inherited ones, the docstring's first line as the
        summary (unless the body sets `summary`); a plain `class Config:` becomes a dataclass."""
        super().__init_subclass__()
        if name is not None:
            cls.name = name
            if "summary" not in vars(cls) and cls.__doc__:
                cls.summary = cls.__doc__.strip().splitlines()[0].rstrip(".")
        if flags:
            known = [f.name for f in dataclasses.fields(Capabilities)]
            unknown = [f for f in flags if f not in known]
            if unknown:
                raise TypeError(
                    f"{cls.__qualname__}: unknown capability {unknown[0]!r} in the class line; "
                    f"expected name= or one of {known}"
                )
            cls.capabilities = dataclasses.replace(cls.capabilities, **flags)
        config = vars(cls).get("Config")
        if isinstance(config, type) and "__dataclass_fields__" not in vars(config):
            cls.Config = dataclass(config)

    def __init__(self, cfg: Any = None, dims: Any = None) -> None:
        super().__init__()
        self.cfg = cfg if cfg is not None else self.Config()
        self.dims = dims

    @classmethod
    def check(cls, cfg: Any, dims: Any) -> list[tuple[str, str]]:
        """Extra checks of a config against model sizes: (parameter, problem) pairs."""
        return []

    def extra_repr(self) -> str:
        return f"{self.kind}={self.name}"

    def matmul_flops(self) -> int:
        """Forward FLOPs of one token through this component's projections (2 per weight)."""
        return linear_flops(self)

    @classmethod
    def describe(cls) -> dict[str, Any]:
        """The component's parameters with type, default and doc, for `zoo show`."""
        hints = typing.get_type_hints(cls.Config)
        params = {}
        for f in dataclasses.fields(cls.Config):
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
            params[f.name] = {
                "type": _type_name(hints[f.name]),
                "default": default,
                "doc": f.metadata.get("doc", ""),
            }
        flags = dataclasses.asdict(cls.capabilities)
        caps = {k: flags[k] for k in capabilities_of(cls.kind)}  # only the kind's own
        return {
            "kind": cls.kind,
            "name": cls.name,
            "summary": cls.summary,
            "params": params,
            "capabilities": caps,
        }


def linear_flops(module: nn.Module) -> int:
    """2 x weights of every nn.Linear under `module`; a sub-component's own count is used."""
    if isinstance(module, nn.Linear):
        return 2 * module.weight.numel()
    total = 0
    for child in module.children():
        if isinstance(child, Component):
            total += child.matmul_flops()
        else:
            total += linear_flops(child)
    return total


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in typing.get_args(tp))
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        return " | ".join(_type_name(a) for a in typing.get_args(tp))
    if origin is list:
        (arg,) = typing.get_args(tp) or (Any,)
        return f"list[{_type_name(arg)}]"
    if tp is type(None):
        return "null"
    return getattr(tp, "__name__", str(tp))


def config_defaults(cls: type) -> dict[str, Any]:
    """Every field of a component config with its default value."""
    out = {}
    for f in dataclasses.fields(cls.Config):
        out[f.name] = f.default if f.default is not dataclasses.MISSING else f.default_factory()
    return out


_EXPONENT = re.compile(r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)[eE][-+]?[0-9]+")
MAX_INT = 2**63  # what torch and the tensors' int64 can hold


def read_number(value: Any, tp: Any) -> Any:
    """`value` with exponent notation (`1e-6`, a string in YAML 1.1) read as the number
    it spells where `tp` takes a number (lists item by item); anything else unchanged."""
    if isinstance(value, list) and typing.get_origin(tp) is list:
        (arg,) = typing.get_args(tp) or (Any,)
        return [read_number(v, arg) for v in value]
    if not isinstance(value, str) or len(value) > 40 or not _EXPONENT.fullmatch(value.strip()):
        return value
    takes = _scalar_types(tp)
    if float in takes:
        return float(value)
    if int in takes:
        exact = decimal.Decimal(value.strip())
        if exact.adjusted() < 19 and exact == exact.to_integral_value():  # else: refused as str
            return int(exact)
    return value


def _scalar_types(tp: Any) -> set[Any]:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return {a for arg in typing.get_args(tp) for a in _scalar_types(arg)}
    return {tp}


def show(value: Any) -> str:
    """`repr(value)` for a message; an integer past Python's int-to-text limit as its size."""
    try:
        text = repr(value)
    except ValueError:
        if isinstance(value, int):
            return f"an integer of {value.bit_length()} bits"
        return f"a {type(value).__name__} holding an integer too large to print"
    return text


def check_value(value: Any, tp: Any, meta: dict[str, Any]) -> str | None:
    """Return why `value` does not fit type `tp` and the field checks, or None when it does."""
    err = _check_type(value, tp)
    if err:
        return err
    if value is None:
        return None
    if "choices" in meta and value not in meta["choices"]:
        return f"must be one of {list(meta['choices'])}, got {show(value)}"
    lo, hi = meta.get("min"), meta.get("max")
    if lo is not None and value < lo:
        return f"must be >= {lo}, got {show(value)}"
    if hi is not None and value > hi:
        return f"must be <= {hi}, got {show(value)}"
    if meta.get("lt") is not None and value >= meta["lt"]:
        return f"must be < {meta['lt']}, got {show(value)}"
    if meta.get("gt") is not None and value <= meta["gt"]:
        return f"must be > {meta['gt']}, got {show(value)}"
    return None


def _check_type(value: Any, tp: Any) -> str | None:
    origin = typing.get_origin(tp)
    if tp is Any:
        return None
    if origin is typing.Literal:
        allowed = typing.get_args(tp)
        return None if value in allowed else f"must be one of {list(allowed)}, got {show(value)}"
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        args = typing.get_args(tp)
        errs = [_check_type(value, a) for a in args]
        if any(e is None for e in errs):
            return None
        non_null = [a for a in args if a is not type(None)]
        if len(non_null) == 1:  # Optional[X]: say what X needs
            return _check_type(value, non_null[0])
        return f"must be {_type_name(tp)}, got {type(value).__name__} {show(value)}"
    if origin is list:
        if not isinstance(value, list):
            return f"must be a list, got {type(value).__name__} {show(value)}"
        (arg,) = typing.get_args(tp) or (Any,)
        for i, v in enumerate(value):
            err = _check_type(v, arg)
            if err:
                return f"item {i} {err}"
        return None
    if tp is type(None):
        return None if value is None else f"must be null, got {show(value)}"
    if tp is bool:
        return None if isinstance(value, bool) else f"must be true or false, got {show(value)}"
    if tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
        if ok and not -MAX_INT <= value < MAX_INT:
            return f"must be a 64-bit integer, got {show(value)}"
        return None if ok else f"must be an integer, got {type(value).__name__} {show(value)}"
    if tp is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if ok and isinstance(value, int) and abs(value) > sys.float_info.max:
            return f"must be a finite number, got {show(value)}"
        if ok and isinstance(value, float) and not math.isfinite(value):
            return f"must be a finite number, got {show(value)}"
        return None if ok else f"must be a number, got {type(value).__name__} {show(value)}"
    if tp is str:
        if not isinstance(value, str):
            return f"must be a string, got {show(value)}"
        if printable(value) != value:  # would reach terminals through names and messages
            return f"must not contain control characters, got {show(value)}"
        return None
    return None
