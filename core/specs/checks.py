"""Cross-field checks of a build plan: sizes, capabilities, family and head, per stack and layer."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..parts.interfaces import Attention, Dims
from .plan import LAYER_PARTS, BuildPlan, LayerPlan, Part, StackPlan

Report = Callable[[tuple, str], None]  # (key path, problem)
SIZE_LIMIT = 2e12  # parameters; more is a typo, not a model
MAX_LEN = 2**24  # longest max_len: 16M positions
TOKEN_KEYS = (
    "pad_token_id",
    "bos_token_id",
    "eos_token_id",
    "decoder_start_token_id",
    "forced_eos_token_id",
)


def check_plan(plan: BuildPlan, data: dict[str, Any], report: Report) -> None:
    """Report every combination the plan's components declare they cannot run."""
    head = plan.head.cls
    if plan.family not in head.families:
        report(
            ("head", "kind"),
            f"head {head.name!r} does not fit a {plan.family} model; "
            f"it fits: {', '.join(head.families)}",
        )
    vocab = min(stack.dims.vocab_size for stack in plan.stacks)  # ids every stack may see
    for key in TOKEN_KEYS:  # generation would index past the embedding table
        value = data[key]
        for tok in value if isinstance(value, list) else [value]:
            if tok is not None and not 0 <= tok < vocab:
                report((key,), f"token id {tok} is outside the vocabulary 0..{vocab - 1}")
    sizes = {stack.role.which: stack.dims.vocab_size for stack in plan.stacks}
    if data["tie_embeddings"] and len(set(sizes.values())) > 1:
        report(
            ("decoder", "vocab_size"),
            f"tie_embeddings shares one token table, but the stacks' vocabularies differ "
            f"({', '.join(f'{k} {v}' for k, v in sizes.items())}); set tie_embeddings: false",
        )
    est = data["vocab_size"] * data["d_model"]
    for stack in plan.stacks:
        prefix = (stack.role.which,) if plan.family == "encoder-decoder" else ()
        check_stack(stack, prefix, report)
        est += size_estimate(stack)
    if data["mup"]:
        check_mup(plan, report)
    if data["max_len"] > MAX_LEN:  # position tables, caches and masks scale with it
        report(("max_len",), f"must be <= {MAX_LEN}, got {data['max_len']}")
    if est > SIZE_LIMIT:
        report(("d_model",), f"absurd size: about {est:.2e} parameters (limit 2e12)")


def check_stack(stack: StackPlan, prefix: tuple, report: Report) -> None:
    """Component checks, attention capabilities and sharing consistency of one stack."""
    check_part(stack.embedding, stack.dims, prefix + ("embedding",), report)
    if getattr(stack.embedding.config, "predict_streams", 0) and not stack.role.causal:
        report(
            prefix + ("embedding", "predict_streams"),
            f"predicting streams run beside a causal decoder; the {stack.role.which} stack "
            "is bidirectional",
        )
    check_part(stack.position, stack.position_dims, prefix + ("position",), report)
    check_part(stack.sharing, stack.dims, prefix + ("sharing",), report)
    first = stack.layers[0].components()
    for layer in {id(layer): layer for layer in stack.layers}.values():  # each distinct once
        comps = layer.components()
        where = prefix if comps == first else prefix + ("layers",)
        inner = layer.block.cls.sublayer_dims(layer.block.config, stack.dims)
        for kind in LAYER_PARTS:
            dims = inner if kind in ("attention", "ffn") else stack.dims
            check_part(getattr(layer, kind), dims, where + (kind,), report)
        if layer.position is not None:
            check_layer_position(layer.position, stack, where + ("position",), report)
        check_attention(layer.attention, stack, where + ("attention",), report, layer.position)
        if stack.role.cross and not layer.block.cls.capabilities.cross_layer:
            block = layer.block.cls.name
            report(
                where + ("block",),
                f"block {block!r} cannot hold the cross-attention a {stack.role.which} stack needs",
            )
    shared: dict[str, tuple[int, Any]] = {}  # a shared module's first layer and options
    for i, layer in enumerate(stack.layers):
        att = layer.attention
        for key, options in att.cls.shared_modules(att.config).items():
            first, stated = shared.setdefault(key, (i, options))
            if stated != options:
                report(
                    prefix + ("layers",),
                    f"layer {i}: attention {att.cls.name!r} builds the shared {key} with "
                    f"{options}, layer {first} with {stated}: a shared module has one set",
                )
                break
    check_stream_steps(stack, prefix, report)
    if stack.sharing_error is not None:
        report(prefix + ("sharing",), stack.sharing_error)
        return
    seen: dict[int, LayerPlan] = {}
    for i, group in enumerate(stack.layer_map):
        layer = seen.setdefault(group, stack.layers[i])
        if layer is not stack.layers[i] and layer.components() != stack.layers[i].components():
            report(
                prefix + ("layers",),
                f"layer {i} shares parameters with another layer but has different components",
            )
            return


def check_stream_steps(stack: StackPlan, prefix: tuple, report: Report) -> None:
    """A layer that upsamples the stream adds the stream after an earlier layer."""
    for i, layer in enumerate(stack.layers):
        step = layer.attention.cls.stream_step(layer.attention.config)
        if step is not None and step.upsample_from is not None and not step.upsample_from < i:
            report(
                prefix + ("layers",),
                f"layer {i}: upsample_from {step.upsample_from} is not an earlier layer",
            )


def check_mup(plan: BuildPlan, report: Report) -> None:
    """muP sets the attention scale and the readout multiplier: every attention and the head
    must declare that they apply them (the `mup` capability)."""
    if not plan.head.cls.capabilities.mup:
        report(
            ("mup", "base_width"),
            f"head {plan.head.cls.name!r} does not apply muP's output multiplier",
        )
    refused = {
        layer.attention.cls.name
        for stack in plan.stacks
        for layer in stack.layers
        if not layer.attention.cls.capabilities.mup
    }
    for name in sorted(refused):
        report(
            ("mup", "base_width"),
            f"attention {name!r} does not apply muP's 1/head_dim attention scale",
        )


def check_layer_position(position: Part, stack: StackPlan, path: tuple, report: Report) -> None:
    """A layer's own position: its checks, and no vectors to embed (the stack embeds once)."""
    check_part(position, stack.position_dims, path, report)
    if position.cls.capabilities.embed:
        report(
            path + ("kind",),
            f"position {position.cls.name!r} adds vectors to the embeddings, which happens "
            "once per stack; a layer's own position may only rotate or bias",
        )


def check_attention(
    attention: Part, stack: StackPlan, path: tuple, report: Report, position: Part | None = None
) -> None:
    """Refuse an attention that cannot serve its stack's role or its (layer's) position."""
    att, caps = attention.cls, attention.cls.capabilities
    pos = (position or stack.position).cls
    kind_path, which = path + ("kind",), stack.role.which
    if stack.role.causal and not caps.causal:
        report(kind_path, f"attention {att.name!r} cannot be causal, which a {which} stack needs")
    if not stack.role.causal and not caps.bidirectional:
        report(
            kind_path, f"attention {att.name!r} is causal-only; an {which} stack is bidirectional"
        )
    if pos.capabilities.rotate and not caps.accepts_rotate:
        report(
            kind_path, f"attention {att.name!r} cannot apply the rotation of position {pos.name!r}"
        )
    if pos.capabilities.bias and not caps.accepts_bias:
        report(
            kind_path, f"attention {att.name!r} cannot add the score bias of position {pos.name!r}"
        )
    if pos.attentions and att.name not in pos.attentions:
        names = " or ".join(repr(a) for a in pos.attentions)
        report(kind_path, f"position {pos.name!r} is applied only by attention {names}")
    streams = getattr(stack.embedding.config, "predict_streams", 0)
    if streams and not caps.streams:
        report(
            kind_path,
            f"attention {att.name!r} cannot read the {streams} predicting streams the "
            "embedding places after the tokens (predict_streams): use an n-stream attention "
            "(ngram_streams)",
        )
    if stack.role.cross and not provides_cross(att):
        report(path, f"attention {att.name!r} cannot cross-attend, which a {which} stack needs")


def provides_cross(cls: type[Attention]) -> bool:
    """Whether an attention class can build the cross-attention of a decoder layer."""
    overridden = getattr(cls.cross_attention, "__func__", None) is not getattr(
        Attention.cross_attention, "__func__", None
    )
    return cls.capabilities.cross or overridden


def check_part(p: Part, dims: Dims, path: tuple, report: Report) -> None:
    """A component's own checks of its config against the sizes it will be built with."""
    if p.cls.capabilities.even_head_dim and dims.head_dim % 2:
        report(
            path + ("kind",),
            f"{p.kind} {p.cls.name!r} needs an even head dimension, got head_dim {dims.head_dim}",
        )
    try:
        problems = list(p.cls.check(p.config, dims))
    except Exception as exc:  # noqa: BLE001 - a plugin's check() must not crash validation
        report(path, f"{p.kind} {p.cls.name!r} (plugin {p.plugin!r}) check() failed: {exc!r}")
        return
    for pname, problem in problems:
        report(path + ((pname,) if pname else ()), problem)


def size_estimate(stack: StackPlan) -> int:
    """A rough parameter count of one stack (shared layers once), to catch absurd sizes."""
    d, ff = stack.dims.d_model, stack.dims.d_ff
    inner = stack.dims.n_heads * stack.dims.head_dim
    est = len(set(stack.layer_map)) * (4 * d * inner + 3 * d * ff)
    if stack.position.cls.capabilities.embed:  # a position table may hold max_len vectors
        est += stack.dims.max_len * d
    return est
