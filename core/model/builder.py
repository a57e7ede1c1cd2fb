"""Turn a resolved spec into a ZooModel: components from the registry, wired per stack."""

from __future__ import annotations

import contextlib
import inspect
import json
from collections.abc import Iterator, Mapping
from typing import Any

import torch
from torch import nn

from ..memory import check_fits
from ..parts.interfaces import Dims, NormFactory
from ..parts.registry import Registry, check_attention_impl, get_registry
from ..specs.mup import hidden_matrices, scale_hidden_init, widened_source, width_ratio
from ..specs.plan import BuildPlan, LayerPlan, Part, StackPlan
from ..specs.spec import Spec, load_spec
from .output_shapes import check_first_forward
from .placement import as_device, as_dtype
from .stack import Stack
from .zoo_model import ZooModel


def build_model(
    spec_or_name: Any,
    overrides: Mapping[str, Any] | None = None,
    device: str | torch.device | None = None,
    dtype: torch.dtype | str | None = None,
    *,
    registry: Registry | None = None,
    attention_impl: str | None = None,
) -> ZooModel:
    """Build (and initialise) a model from a spec, name, path, dict or YAML text.

    device="meta" builds the structure without allocating memory or initialising.
    dtype: float32, float16, bfloat16 or float64, as a torch.dtype or its name.
    attention_impl: the attention kernel its layers run (archzoo.list_attention_impls();
    default "auto"); `model.set_attention_impl` changes it later.
    """
    device, dtype = as_device(device), as_dtype(dtype)  # before any work, naming the argument
    reg = registry or get_registry()
    if attention_impl is not None:
        check_attention_impl(attention_impl, reg)
    chosen = getattr(spec_or_name, "attention_impl", None)  # a Spec's deprecated key
    spec = spec_or_name
    validated = isinstance(spec, Spec) and spec.plan is not None and spec.plan.registry is reg
    if overrides or not validated:
        spec = load_spec(spec_or_name, overrides, registry=reg)
    device = device if device is not None else torch.device("cpu")
    meta = device.type == "meta"
    if not meta:  # the weights' size is known before allocating any: refuse what cannot fit
        check_fits(
            model_bytes(spec),
            device,
            f"building {spec.name!r}",
            "build it on device='meta' to inspect it, or shrink the spec",
        )
    with torch.device(device), skip_torch_init() if meta else contextlib.nullcontext():
        model = assemble(spec, spec.plan)
        if not meta:
            init_weights(model, spec.data["init_std"])
    if not meta and spec.data["mup"]:
        scale_hidden_init(model, hidden_matrix_names(spec, model), width_ratio(spec.data))
    impl = attention_impl or spec.attention_impl or chosen
    if impl is not None:
        model.set_attention_impl(impl)
    check_first_forward(model, reg.plugin_of)  # a plugin part's output shape, named
    if dtype is not None:
        model = model.to(dtype)
    return model


def hidden_matrix_names(spec: Spec, model: nn.Module) -> list[str]:
    """muP's hidden matrices of `model` (built from `spec`): the parameters with two
    dimensions that grow when the spec is built at twice its width (on meta, no memory)."""
    wide = load_spec(widened_source(spec.source_data()), registry=spec.plan.registry)
    with torch.device("meta"), skip_torch_init():
        return hidden_matrices(model, assemble(wide, wide.plan))


def model_bytes(spec: Spec) -> int:
    """Bytes of a spec's parameters and buffers as built (tied weights once), from a meta build."""
    with torch.device("meta"), skip_torch_init():
        model = assemble(spec, spec.plan)
    seen: set[int] = set()
    total = 0
    for t in [*model.parameters(), *model.buffers()]:
        if id(t) not in seen:
            seen.add(id(t))
            total += t.numel() * t.element_size()
    return total


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


def assemble(spec: Spec, plan: BuildPlan) -> ZooModel:
    """Instantiate every component of a spec's build plan (no initialisation)."""
    stacks: dict[str, Stack] = {}
    first_embedding = None
    for stack in plan.stacks:
        embedding = stack.embedding.make(stack.dims, make_norm=norm_factory(stack.norm, stack.dims))
        if first_embedding is not None and spec.data["tie_embeddings"]:
            embedding.share_word_weight(first_embedding)
        if first_embedding is None:
            first_embedding = embedding
        blocks: dict[int, nn.Module] = {}
        shared: dict[str, nn.Module] = {}  # modules the stack's layers share, by their key
        for i, group in enumerate(stack.layer_map):
            if group not in blocks:
                blocks[group] = make_block(
                    stack.layers[i], stack.dims, cross=stack.role.cross, index=i, shared=shared
                )
        final = stack.layers[-1].block.cls.capabilities.final_norm
        layer_positions, position_of = layer_positions_of(stack)
        stacks[stack.role.which] = Stack(
            embedding=embedding,
            position=stack.position.make(stack.position_dims, causal=stack.role.causal),
            layer_positions=layer_positions,
            position_of=position_of,
            blocks=[blocks[g] for g in sorted(blocks)],
            layer_map=stack.layer_map,
            final_norm=norm_factory(stack.norm, stack.dims)() if final else None,
            causal=stack.role.causal,
            checkpointing=spec.data["activation_checkpointing"],
        )
    last = plan.stacks[-1]
    head = plan.head.make(
        last.dims,
        embedding=stacks[last.role.which].embedding,
        make_norm=norm_factory(last.norm, last.dims),
        family=spec.family,
    )
    return ZooModel(spec, encoder=stacks.get("encoder"), decoder=stacks.get("decoder"), head=head)


def layer_positions_of(stack: StackPlan) -> tuple[list[nn.Module], list[int | None]]:
    """The distinct positions layers set for themselves (one module per distinct mapping),
    and for each layer the index of its own, or None for the stack's."""
    modules: list[nn.Module] = []
    index: dict[str, int] = {}
    position_of: list[int | None] = []
    for layer in stack.layers:
        if layer.position is None:
            position_of.append(None)
            continue
        key = json.dumps(layer.position.spec, sort_keys=True)
        if key not in index:
            index[key] = len(modules)
            modules.append(layer.position.make(stack.position_dims, causal=stack.role.causal))
        position_of.append(index[key])
    return modules, position_of


def norm_factory(norm: Part, dims: Dims) -> NormFactory:
    """A factory of the spec's norm: each call makes a new one (of width `dim` or d_model;
    `options` such as `heads` and `bias` go to the norm's constructor)."""
    return lambda dim=None, **options: norm.make(dims, dim=dim, **options)


def make_block(
    layer: LayerPlan,
    dims: Dims,
    *,
    cross: bool,
    index: int = 0,
    shared: dict[str, nn.Module] | None = None,
) -> nn.Module:
    """One block with its attention, ffn, norms and (in a cross stack) cross-attention; an
    attention whose constructor takes `layer_index` gets the block's index in its stack, one
    that takes `shared` the stack's dict of modules its layers share (one object, registered
    under each layer that uses it: one set of parameters)."""
    att, make_norm = layer.attention, norm_factory(layer.norm, dims)
    inner = layer.block.cls.sublayer_dims(layer.block.config, dims)  # a bottleneck's width
    inner_norm = norm_factory(layer.norm, inner)
    norm = {"make_norm": inner_norm} if takes_norm(att.cls) else {}
    depth = {"layer_index": index} if takes_layer_index(att.cls) else {}
    more = {"make_ffn": lambda: layer.ffn.make(inner)} if takes_ffn_factory(layer.block.cls) else {}
    if shared is not None and "shared" in inspect.signature(att.cls.__init__).parameters:
        depth["shared"] = shared
    return layer.block.make(
        dims,
        attention=att.make(inner, **norm, **depth),
        ffn=layer.ffn.make(
            inner, **({"make_norm": inner_norm} if ffn_takes_norm(layer.ffn.cls) else {})
        ),
        make_norm=make_norm,
        cross_attention=att.cls.cross_attention(att.config, inner, **norm) if cross else None,
        **more,
    )


def takes_ffn_factory(cls: type) -> bool:
    """Whether a block's constructor takes a factory of more FFNs (`make_ffn`)."""
    return "make_ffn" in inspect.signature(cls.__init__).parameters


def takes_norm(cls: type) -> bool:
    """Whether an attention's constructor takes the stack's norm factory (`make_norm`)."""
    params = inspect.signature(cls.__init__).parameters
    return "make_norm" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def ffn_takes_norm(cls: type) -> bool:
    """Whether an ffn's constructor takes the stack's norm factory (`make_norm`)."""
    return "make_norm" in inspect.signature(cls.__init__).parameters


def takes_layer_index(cls: type) -> bool:
    """Whether an attention's constructor takes its block's index (`layer_index`)."""
    return "layer_index" in inspect.signature(cls.__init__).parameters


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
