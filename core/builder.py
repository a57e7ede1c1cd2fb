"""Turn a resolved spec into a ZooModel: components from the registry, wired per stack."""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator, Mapping
from typing import Any

import torch
from torch import nn

from .interfaces import Dims
from .model import Stack, ZooModel
from .registry import Registry, get_registry
from .spec import Spec, component_config, load_spec, position_dims, stack_dims


def build_model(
    spec_or_name: Any,
    overrides: Mapping[str, Any] | None = None,
    device: str | torch.device | None = None,
    dtype: torch.dtype | None = None,
    *,
    registry: Registry | None = None,
) -> ZooModel:
    """Build (and initialise) a model from a spec, name, path, dict or YAML text.

    device="meta" builds the structure without allocating memory or initialising.
    """
    reg = registry or get_registry()
    spec = load_spec(spec_or_name, overrides, registry=reg)
    device = torch.device(device) if device is not None else torch.device("cpu")
    meta = device.type == "meta"
    with torch.device(device), skip_torch_init() if meta else contextlib.nullcontext():
        model = assemble(spec, reg)
        if not meta:
            init_weights(model, spec.data["init_std"])
    if dtype is not None:
        model = model.to(dtype)
    return model


# torch.nn.init functions that the default reset_parameters of torch's layers call
_INIT_FUNCTIONS = (
    "uniform_",
    "normal_",
    "trunc_normal_",
    "constant_",
    "ones_",
    "zeros_",
    "eye_",
    "xavier_uniform_",
    "xavier_normal_",
    "kaiming_uniform_",
    "kaiming_normal_",
    "orthogonal_",
)


@contextlib.contextmanager
def skip_torch_init() -> Iterator[None]:
    """Make torch.nn.init functions no-ops while a model is built on the meta device.

    Meta tensors hold no values, so initialising them is pointless, and the first random
    fill of a meta tensor imports torch._dynamo (about 3 s), which `zoo build`, `from_hf`
    and `load` (all of which build on meta) would otherwise pay on every run.
    """
    saved = {name: getattr(nn.init, name) for name in _INIT_FUNCTIONS}

    def keep(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        return tensor

    for name in _INIT_FUNCTIONS:
        setattr(nn.init, name, keep)
    try:
        yield
    finally:
        for name, fn in saved.items():
            setattr(nn.init, name, fn)


def _make(reg: Registry, kind: str, comp: dict, dims: Dims, **parts: Any) -> nn.Module:
    cls = reg.get(kind, comp["kind"])
    return cls(component_config(reg, kind, comp), dims, **parts)


def _make_attention(reg: Registry, comp: dict, dims: Dims, make_norm: Any, **parts: Any) -> Any:
    """An attention, handed the stack's norm factory when its constructor takes `make_norm`."""
    cls = reg.get("attention", comp["kind"])
    params = inspect.signature(cls.__init__).parameters
    if "make_norm" in params or any(p.kind is p.VAR_KEYWORD for p in params.values()):
        parts["make_norm"] = make_norm
    return cls(component_config(reg, "attention", comp), dims, **parts)


def assemble(spec: Spec, reg: Registry) -> ZooModel:
    """Instantiate every component of `spec` (no initialisation)."""
    stacks: dict[str, Stack] = {}
    first_embedding = None
    for which in spec.stacks():
        cfg = spec.stack(which)
        dims = stack_dims(cfg)
        causal = which == "decoder"
        cross = spec.family == "encoder-decoder" and which == "decoder"

        def norm_factory(comp: dict, dims: Dims = dims) -> Any:
            return lambda dim=None: _make(reg, "norm", comp, dims, dim=dim)

        embedding = _make(
            reg, "embedding", cfg["embedding"], dims, make_norm=norm_factory(cfg["norm"])
        )
        if first_embedding is not None and spec.data["tie_embeddings"]:
            embedding.share_word_weight(first_embedding)
        if first_embedding is None:
            first_embedding = embedding
        position = _make(
            reg, "position", cfg["position"], position_dims(reg, cfg, dims), causal=causal
        )
        sharing = _make(reg, "sharing", cfg["sharing"], dims)
        layer_map = sharing.assign(cfg["n_layers"])
        layers = spec.layer_components(which)
        blocks: dict[int, nn.Module] = {}
        for i, group in enumerate(layer_map):
            if group in blocks:
                continue
            comps = layers[i]
            blocks[group] = _make(
                reg,
                "block",
                comps["block"],
                dims,
                attention=_make_attention(
                    reg, comps["attention"], dims, norm_factory(comps["norm"])
                ),
                ffn=_make(reg, "ffn", comps["ffn"], dims),
                make_norm=norm_factory(comps["norm"]),
                cross_attention=_make_attention(
                    reg,
                    _cross_attention(comps["attention"]),
                    dims,
                    norm_factory(comps["norm"]),
                    cross=True,
                )
                if cross
                else None,
            )
        block_cls = reg.get("block", layers[-1]["block"]["kind"])
        final_norm = norm_factory(cfg["norm"])() if block_cls.capabilities.final_norm else None
        stacks[which] = Stack(
            embedding=embedding,
            position=position,
            blocks=[blocks[g] for g in sorted(blocks)],
            layer_map=layer_map,
            final_norm=final_norm,
            causal=causal,
            checkpointing=spec.data["activation_checkpointing"],
        )
    last = spec.stacks()[-1]
    cfg = spec.stack(last)
    dims = stack_dims(cfg)
    head = _make(
        reg,
        "head",
        spec.data["head"],
        dims,
        embedding=stacks[last].embedding,
        make_norm=lambda dim=None: _make(reg, "norm", cfg["norm"], dims, dim=dim),
        family=spec.family,
    )
    return ZooModel(spec, encoder=stacks.get("encoder"), decoder=stacks.get("decoder"), head=head)


def _cross_attention(attention: dict) -> dict:
    """Cross-attention is dense `mha` with the self-attention's projection settings."""
    keys = ("n_kv_heads", "fused_qkv", "bias", "out_bias", "scale")
    return {"kind": "mha", **{k: attention[k] for k in keys if k in attention}}


TieGroups = list[list[tuple[nn.Module, str]]]


def capture_ties(model: nn.Module) -> TieGroups:
    """Every parameter that several modules hold, as (module, attribute) lists."""
    refs: dict[int, list[tuple[nn.Module, str]]] = {}
    for module in model.modules():
        for name, p in module.named_parameters(recurse=False):
            refs.setdefault(id(p), []).append((module, name))
    return [group for group in refs.values() if len(group) > 1]


def restore_ties(groups: TieGroups) -> None:
    """Make every holder of a tied parameter hold the first holder's parameter again."""
    for group in groups:
        first = getattr(group[0][0], group[0][1])
        for module, name in group[1:]:
            setattr(module, name, first)


def materialize(model: nn.Module, device: str | torch.device) -> nn.Module:
    """Allocate (uninitialised) storage for a meta-device model, keeping tied weights tied."""
    groups = capture_ties(model)
    model = model.to_empty(device=device)
    restore_ties(groups)
    return model


@torch.no_grad()
def init_weights(model: nn.Module, std: float) -> None:
    """Normal(0, std) weights, zero biases, unit norm scales; components may override."""
    for module in model.modules():
        kind = getattr(module, "kind", None)
        custom = getattr(module, "init_weights", None)
        if custom is not None and module is not model:
            custom(std)
        elif isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=std)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)
        elif kind == "norm":  # other parameters keep the values their constructor gave
            for name, p in module.named_parameters(recurse=False):
                if name in ("weight", "bias"):
                    (nn.init.ones_ if name == "weight" else nn.init.zeros_)(p)
        elif kind == "head":
            for name, p in module.named_parameters(recurse=False):
                if name == "bias":
                    nn.init.zeros_(p)
