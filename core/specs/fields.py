"""The model-level keys of a spec: types, defaults, ranges and one-line docs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..parts.component import param

COMPONENT_KEYS: tuple[str, ...] = (
    "embedding",
    "position",
    "attention",
    "block",
    "norm",
    "ffn",
    "sharing",
    "head",
)
COMPONENT_DEFAULTS: dict[str, str] = {
    "embedding": "token",
    "position": "learned",
    "attention": "mha",
    "block": "pre_ln",
    "norm": "layernorm",
    "ffn": "mlp",
    "sharing": "none",
    "head": "none",
}
REQUIRED = ("family", "vocab_size", "d_model", "n_layers", "n_heads")
DERIVED = ("head_dim", "d_ff", "attention_dropout")  # null in a source: computed from others


@dataclass
class ModelFields:
    """Scalar keys at the top of a spec."""

    name: str = param("unnamed", "model name")
    extends: str | None = param(None, "zoo name or relative path of a spec to start from")
    family: Literal["encoder", "decoder", "encoder-decoder"] | None = param(
        None, "encoder | decoder | encoder-decoder"
    )
    vocab_size: int | None = param(None, "number of token ids", min=1, max=10_000_000)
    d_model: int | None = param(None, "hidden size", min=1, max=1_000_000)
    n_layers: int | None = param(None, "number of blocks per stack", min=1, max=10_000)
    n_heads: int | None = param(None, "attention heads", min=1, max=100_000)
    head_dim: int | None = param(None, "size of one head; null means d_model / n_heads", min=1)
    d_ff: int | None = param(None, "feed-forward inner size; null means 4 * d_model", min=1)
    max_len: int = param(512, "longest sequence (learned positions need it)", min=1)
    dropout: float = param(0.1, "dropout on embeddings and residual branches", min=0.0, lt=1.0)
    attention_dropout: float | None = param(
        None, "dropout on attention probabilities; null means dropout", min=0.0, lt=1.0
    )
    init_std: float = param(0.02, "std of the normal init of weights", gt=0.0)
    mup: dict | None = param(
        None, "muP: {base_width: N} scales init, learning rates and multipliers by d_model / N"
    )
    pad_token_id: int | None = param(None, "padding token id", min=0)
    bos_token_id: int | None = param(None, "beginning-of-sequence token id", min=0)
    eos_token_id: int | list[int] | None = param(None, "end-of-sequence token id(s)")
    decoder_start_token_id: int | None = param(
        None, "encoder-decoder: first decoder token in generation", min=0
    )
    forced_eos_token_id: int | None = param(
        None, "generation: token forced at the last allowed step (BART)", min=0
    )
    tie_embeddings: bool = param(
        True, "encoder-decoder: one token table for both stacks (one vocabulary size)"
    )
    activation_checkpointing: bool = param(
        False, "training: recompute each block in backward instead of storing activations"
    )


@dataclass
class MupFields:
    """The keys of `mup:` (the maximal-update parametrisation, Yang et al., Tensor Programs V)."""

    base_width: int | None = param(
        None, "d_model at which muP's init and learning rates equal the spec's own", min=1
    )


# Keys an `encoder:` / `decoder:` section may override, and a `layers:` entry.
STACK_KEYS: tuple[str, ...] = (
    "vocab_size",  # a stack's token table (FSMT: a source and a target vocabulary)
    "n_layers",
    "n_heads",
    "head_dim",
    "d_ff",
    "max_len",  # a stack's position table (LED: a 16k encoder, a 1k decoder)
    "dropout",
    "attention_dropout",
    *(key for key in COMPONENT_KEYS if key != "head"),  # the head sits on the last stack only
    "layers",
)
LAYER_KEYS: tuple[str, ...] = ("select", "attention", "ffn", "block", "norm", "position")
