"""What a forward pass records on request: hidden states and attention probabilities."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from torch import Tensor

from .interfaces import AttentionContext


def requested_layers(output_attentions: bool | Iterable[int] | None, n_layers: int) -> set[int]:
    """Layer indices asked for: all (True), none (False/None) or the given ones (checked)."""
    if output_attentions is None or output_attentions is False:
        return set()
    if output_attentions is True:
        return set(range(n_layers))
    layers = set()
    for i in output_attentions:
        if isinstance(i, bool) or not isinstance(i, int) or not -n_layers <= i < n_layers:
            raise ValueError(
                f"output_attentions: layer {i!r} is not a layer index of a stack of "
                f"{n_layers} layers"
            )
        layers.add(i % n_layers)
    return layers


@dataclass
class StackRecord:
    """Collects one stack's hidden states (Hugging Face order) and requested attentions.

    hidden_states: the embedding output, the input of every later layer, and the stack's
    output (after its final norm, where the stack has one): n_layers + 1 tensors.
    """

    hidden: bool
    layers: set[int]
    n_layers: int
    hidden_states: list[Tensor] = field(default_factory=list)
    attentions: list[Tensor | None] = field(default_factory=list)
    cross_attentions: list[Tensor | None] = field(default_factory=list)

    def layer_ctx(
        self, j: int, ctx: AttentionContext, cross: AttentionContext | None
    ) -> tuple[AttentionContext, AttentionContext | None]:
        """Layer j's contexts, asking its attentions for probabilities when requested."""
        if j not in self.layers:
            return ctx, cross
        cross = replace(cross, want_probs=True, probs=None) if cross is not None else None
        return replace(ctx, want_probs=True, probs=None), cross

    def before_layer(self, x: Tensor) -> None:
        if self.hidden:
            self.hidden_states.append(x)

    def after_layer(
        self, j: int, name: str, ctx: AttentionContext, cross: AttentionContext | None
    ) -> None:
        """Take layer j's probabilities (None when the layer was not asked)."""
        for got, out in ((ctx, self.attentions), (cross, self.cross_attentions)):
            if got is None:
                continue
            if got.want_probs and got.probs is None:
                raise ValueError(
                    f"attention {name!r} (layer {j}) does not report its probabilities: "
                    "its forward must call self.record_probs(ctx, q, k, scale=...)"
                )
            out.append(got.probs if got.want_probs else None)

    def final(self, x: Tensor) -> None:
        if self.hidden:
            self.hidden_states.append(x)

    def outputs(self) -> tuple[tuple | None, tuple | None, tuple | None]:
        """(hidden_states, attentions, cross_attentions) as tuples, None when not asked."""
        hidden = tuple(self.hidden_states) if self.hidden else None
        if not self.layers:
            return hidden, None, None
        cross = tuple(self.cross_attentions) if self.cross_attentions else None
        return hidden, tuple(self.attentions), cross
