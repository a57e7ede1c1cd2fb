"""The interface of each component kind: what the builder passes in and what forward returns."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from .component import Component
from .head import Head as Head  # the head kind's interface lives in its own file
from .masks import AttentionMask, causal_mask
from .stream import StreamState, StreamStep

NormFactory = Callable[[], nn.Module]


@dataclass(frozen=True)
class Dims:
    """Model-level sizes every component may read; fixed by the spec, never by a component."""

    vocab_size: int
    d_model: int
    n_heads: int
    head_dim: int
    d_ff: int
    max_len: int
    n_layers: int
    dropout: float
    attention_dropout: float
    init_std: float
    pad_token_id: int | None = None
    score_exponent: float = 0.5  # attention scores x head size ** -this (muP: 1, core/specs/mup.py)
    output_multiplier: float = 1.0  # the LM readout's logits x this (muP: base_width / d_model)


class Embedding(Component):
    """Token (+ segment) ids to vectors of size d_model; adds position vectors it is given.

    The word table is `embed_width` wide and the position vectors `position_width` (the
    same unless the embedding says otherwise); an embedding whose width is not d_model
    (ALBERT's factorized one) projects up to d_model.
    """

    kind: ClassVar[str] = "embedding"
    # names of the per-batch inputs it reads (ERNIE's task_type_ids), given to the model as
    # keywords like an attention's, or "attention_mask" (the stack's own); an instance may
    # narrow them to what its config uses
    inputs: tuple[str, ...] = ()
    # vectors it places before the tokens (PEGASUS-X's global tokens): every layer sees them,
    # the stack drops them from its output
    prefix_tokens: int = 0
    # predicting streams it places after the tokens (ProphetNet's ngram): the stack runs them
    # beside the tokens (an n-stream attention reads them) and returns them apart
    predict_streams: int = 0

    def stream_vectors(self, next_positions: Tensor) -> Tensor:
        """The predicting streams' input (B, n T, d_model), stream after stream, from the
        vectors of each token's next position (B, T, d_model)."""
        raise NotImplementedError(f"embedding {self.name!r} places no predicting streams")

    @classmethod
    def embed_width(cls, cfg: Any, dims: Dims) -> int:
        """Width of the word table and of the position vectors added to it (d_model here)."""
        return dims.d_model

    @classmethod
    def position_width(cls, cfg: Any, dims: Dims) -> int:
        """Width of the position vectors it adds (embed_width unless they join after a projection)."""
        return cls.embed_width(cfg, dims)

    def word_weight(self) -> nn.Parameter:
        """The (vocab, embed_width) token table an LM head may tie to."""
        raise NotImplementedError(f"embedding {self.name!r} has no word table to tie to")

    def share_word_weight(self, other: Embedding) -> None:
        """Use `other`'s token table (one vocabulary across encoder and decoder)."""
        raise NotImplementedError(f"embedding {self.name!r} cannot share its word table")

    def segment_types(self) -> int | None:
        """How many token_type_ids it embeds (0: it takes none), or None when it does not say."""
        return None

    def languages(self) -> int:
        """How many language ids (`langs`, XLM) it embeds; 0: it takes none."""
        return 0

    def forward(
        self,
        input_ids: Tensor,
        token_type_ids: Tensor | None = None,
        position_embeds: Tensor | None = None,
    ) -> Tensor:
        """(B, T) ids -> (B, T, d_model)."""
        raise NotImplementedError


class Position(Component):
    """How order enters the model: embed, rotate queries/keys, bias scores, act on values.

    One instance per stack; `causal` says whether the stack is causal (T5's buckets differ).
    `prepare` runs once per forward with explicit positions; its result is handed to every
    attention layer of the stack. The builder passes dims whose d_model is the stack
    embedding's `position_width`, so embedded vectors fit where they are added.
    """

    kind: ClassVar[str] = "position"
    # the attentions that can apply it (terms made with each layer's own weights); () = any
    attentions: ClassVar[tuple[str, ...]] = ()

    def __init__(self, cfg: Any = None, dims: Any = None, *, causal: bool = False) -> None:
        super().__init__(cfg, dims)
        self.causal = causal
        self.per_layer = False  # True: each layer sees layer_state(state, layer) (UMT5)

    def embed(self, positions: Tensor) -> Tensor | None:
        """(B, T) positions -> (B, T, dims.d_model) vectors added to token embeddings, or None."""
        return None

    def position_limit(self) -> int | None:
        """Positions it can encode are below this (a learned table's size), or None: no bound."""
        return None

    def position_ids(self, input_ids: Tensor, past: int) -> Tensor:
        """(B, T) ids of new tokens after `past` cached ones, when the caller gives none."""
        B, T = input_ids.shape
        return torch.arange(past, past + T, device=input_ids.device).expand(B, T)

    def prompt_ids(self, attention_mask: Tensor) -> Tensor:
        """(B, L) ids of a padded prompt in `generate`: real tokens count from 0, as
        transformers' generate numbers them (pads 0)."""
        return (attention_mask.long().cumsum(-1) - 1).masked_fill(attention_mask == 0, 0)

    def prepare(self, q_pos: Tensor, k_pos: Tensor) -> Any:
        """Per-forward state from (B, Tq) query and (B, Tk) key positions."""
        return None

    def layer_state(self, state: Any, layer: int) -> Any:
        """What layer `layer` of the stack sees of `prepare`'s state, when `per_layer` is set
        (a position with parameters of its own per layer, like UMT5's bias tables)."""
        return state

    def rotate(self, state: Any, q: Tensor, k: Tensor) -> tuple[Tensor, Tensor]:
        """Transform new queries (B, H, Tq, hd) and new keys (B, Hkv, Tq, hd)."""
        return q, k

    def score_bias(self, state: Any, q: Tensor, k: Tensor, scale: float) -> Tensor | None:
        """Additive score term (B or 1, H, Tq, Tk), already on the scaled-score scale.

        q (B, H, Tq, hd) are the rotated queries, k (B, Hkv, Tk, hd) every key attended to
        (cached ones included); scale is the attention's score scale.
        """
        return None

    def stale_cache(self, cached: int, total: int) -> bool:
        """Whether keys cached for the first `cached` tokens no longer fit once the sequence is
        `total` long, so decoding recomputes them (LongRoPE switching to its long factors)."""
        return False

    def value_bias(self, state: Any, probs: Tensor) -> Tensor | None:
        """With `capabilities.values`: (B, H, Tq, hd) added to probs (B, H, Tq, Tk) @ v."""
        return None


@dataclass
class AttentionContext:
    """What an attention layer needs besides its input, made once per forward and stack.

    mask: the factors of which keys each query sees (`archzoo.parts.masks.AttentionMask`).
    position, position_state: the stack's position and its `prepare` result (None in
    cross-attention). cache: this layer's LayerCache (self) or CrossCache (cross) when
    decoding. inputs: per-batch tensors a component reads by name (Longformer's
    "global_attention_mask"), given to the model as `attention_inputs` or as keywords.
    input_ids: the stack's (B, T) token ids, for a pattern that derives from them.
    prefix: how many leading positions are vectors the embedding placed before the tokens
    (PEGASUS-X's global tokens); the stack drops them from its output.
    value_input: (B, T, value_width) what the v projection reads instead of x, set by a
    block for one attention call (a bottleneck block's full-width input); None: x.
    embeddings: the stack's embedding output (B, T, d_model) for the same tokens, for a
    layer that reads the token vectors again (Zamba's shared block).
    stream: where the queries and keys stand on a stream that pooling shortened, and the
    keys' own stream (`archzoo.parts.stream.StreamState`); None where no layer of the stack
    changes the stream's length.
    """

    mask: AttentionMask
    position: Position | None = None
    position_state: Any = None
    cache: Any = None
    inputs: Mapping[str, Tensor] = field(default_factory=dict)
    want_probs: bool = False  # asked for this layer's probabilities (output_attentions)
    probs: Tensor | None = None  # (B, H, Tq, Tk): what Attention.attend returned, when asked
    input_ids: Tensor | None = None  # (B, T) the stack's token ids (new ones when decoding)
    prefix: int = 0  # leading model-made positions before the tokens (embedding.prefix_tokens)
    value_input: Tensor | None = None  # (B, T, value_width): the v projection's own input
    embeddings: Tensor | None = None  # (B, T, d_model) the embedding's output for them
    stream: StreamState | None = None  # pooled geometry (Funnel), set by the stack per layer

    def with_cache(self, cache: Any) -> AttentionContext:
        """This context with one layer's `cache`: a shallow copy, as `dataclasses.replace`
        makes, without re-running `__init__` (it is made per layer and decoding step)."""
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.cache = cache
        return new


class Attention(Component):
    """Projections plus the attention core. forward(x, ctx, memory) -> (B, Tq, d_model).

    With `ctx.cache` set, x holds only the new tokens: new keys/values are appended to the
    cache (self-attention) or the memory's are computed once and reused (cross-attention).
    """

    kind: ClassVar[str] = "attention"
    # names of the per-batch `ctx.inputs` it reads; each is also a keyword of the model's forward
    inputs: ClassVar[tuple[str, ...]] = ()
    # the name of the kernel this layer runs (archzoo.list_attention_impls()); set at run time
    attention_impl: str = "auto"
    # a recurrent mixer's optional kernels (archzoo.list_mixer_impls()); set at run time
    mixer_impl: str = "auto"

    def set_attention_impl(self, name: str) -> None:
        """Run this layer with the attention kernel registered as `name` (the model checks
        the name: `ZooModel.set_attention_impl`)."""
        self.attention_impl = name

    @classmethod
    def cross_attention(cls, cfg: Any, dims: Dims, **parts: Any) -> Attention:
        """The module a decoder layer uses to attend to the encoder output.

        By default the component itself built with `cross=True` (it must declare the
        `cross` capability); a component that cannot cross-attend may return another one.
        """
        return cls(cfg, dims, cross=True, **parts)

    @classmethod
    def shared_modules(cls, cfg: Any) -> dict[str, Any]:
        """The modules a layer of this config shares with other layers of its stack (the
        builder's `shared` dict), key -> the options it builds them with: layers naming one
        key must state the same options (validation checks it). None by default."""
        return {}

    @classmethod
    def stream_step(cls, cfg: Any) -> StreamStep | None:
        """What the stack does to its residual stream before a layer of this config (pool
        it, or upsample it back: `archzoo.parts.stream`), or None: nothing (the default)."""
        return None

    def cache_layout(self) -> tuple[int, int, int | None]:
        """(n_kv_heads, head_dim, window) of the keys this layer caches; window None = all."""
        raise NotImplementedError(f"attention {self.name!r} does not support a KV cache")

    def cache_shapes(self) -> tuple[tuple[int, int], tuple[int, int], int | None]:
        """((heads, width) of the cached keys, (heads, width) of the values, window).

        By default keys and values of `cache_layout`; a latent attention overrides this to
        cache its latent and its rotary key instead (and need not define cache_layout).
        """
        n_kv, head_dim, window = self.cache_layout()
        return (n_kv, head_dim), (n_kv, head_dim), window

    def state_shapes(self) -> dict[str, tuple[tuple[int, ...], torch.dtype | None]] | None:
        """A recurrent mixer's decoding state per batch row, name -> (shape, dtype or None for
        the model's), kept in a StateCache instead of keys and values; None (attention): it
        caches keys and values (`cache_shapes`)."""
        return None

    def cache_parts(self) -> tuple[Attention, ...]:
        """The mixers this layer runs side by side, each caching its own way (a PartsCache
        of their caches); () for a layer that caches as itself."""
        return ()

    def cache_width(self) -> tuple[int, int | None]:
        """(numbers cached per token, window or None); a latent attention reports its latent."""
        (hk, dk), (hv, dv), window = self.cache_shapes()
        return hk * dk + hv * dv, window

    def keys_per_query(self, context: int, causal: bool) -> float:
        """Keys a query attends to at `context` tokens (the last query when causal)."""
        return float(context)

    def attention_flops(self, context: int, causal: bool) -> float:
        """FLOPs of one query's score and value products: 2 + 2 per key and query channel."""
        return 4 * self.dims.n_heads * self.dims.head_dim * self.keys_per_query(context, causal)

    def keep_mask(self, length: int, *, causal: bool) -> Tensor:
        """Bool (length, length): the keys each query of one unpadded sequence may attend to."""
        if causal:
            return causal_mask(length, length)
        return torch.ones(length, length, dtype=torch.bool)

    def attend(
        self, x: Tensor, ctx: AttentionContext, memory: Tensor | None = None
    ) -> tuple[Tensor, Tensor | None]:
        """(B, Tq, d_model) and the probabilities (B, H, Tq, Tk) when `ctx.want_probs`."""
        raise NotImplementedError

    def forward(self, x: Tensor, ctx: AttentionContext, memory: Tensor | None = None) -> Tensor:
        out, probs = self.attend(x, ctx, memory)
        if ctx.want_probs:  # the stack's record of this layer takes them from here
            ctx.probs = probs
        return out


class Norm(Component):
    """A normalization layer over the last dimension."""

    kind: ClassVar[str] = "norm"


class FeedForward(Component):
    """Position-wise feed-forward: (B, T, d_model) -> (B, T, d_model)."""

    kind: ClassVar[str] = "ffn"

    def active_parameters(self) -> int | None:
        """Parameters one token uses when fewer than all (mixture of experts); None: all."""
        return None


class Block(Component):
    """Wires attention, optional cross-attention and the FFN with norms and residuals.

    The builder hands over the parts; a layout only says which norms it needs
    (`make_norms`) and how the residual stream flows (`forward`).
    """

    kind: ClassVar[str] = "block"
    # names of the per-batch `ctx.inputs` it reads; each is also a keyword of the model's forward
    inputs: tuple[str, ...] = ()

    def __init__(
        self,
        cfg: Any,
        dims: Dims,
        *,
        attention: nn.Module,
        ffn: nn.Module,
        make_norm: NormFactory,
        cross_attention: nn.Module | None = None,
    ) -> None:
        super().__init__(cfg, dims)
        self.attention = attention
        self.cross_attention = cross_attention
        self.ffn = ffn
        self.dropout = nn.Dropout(dims.dropout)
        self.make_norms(make_norm, cross=cross_attention is not None)

    @classmethod
    def sublayer_dims(cls, cfg: Any, dims: Dims) -> Dims:
        """The sizes its attention and FFN are built (and checked) with: the model's here; a
        layout that runs them at another width (a bottleneck) says so."""
        return dims

    def make_norms(self, make_norm: NormFactory, *, cross: bool) -> None:
        """Create the norms this layout uses (as attributes): one before each sublayer here."""
        self.attention_norm = make_norm()
        self.cross_norm = make_norm() if cross else None
        self.ffn_norm = make_norm()

    def forward(
        self,
        x: Tensor,
        self_ctx: AttentionContext,
        memory: Tensor | None = None,
        cross_ctx: AttentionContext | None = None,
    ) -> Tensor:
        """Each sublayer in turn through `residual` (a layout overrides one or the other)."""
        x = self.residual(x, "attention", lambda h: self.attention(h, self_ctx))
        if self.cross_attention is not None:
            x = self.residual(x, "cross", lambda h: self.cross_attention(h, cross_ctx, memory))
        return self.finish(self.residual(x, "ffn", self.ffn), self_ctx)

    def finish(self, x: Tensor, self_ctx: AttentionContext) -> Tensor:
        """The block's output from its residual stream (a layout may mask it): x here."""
        return x

    def residual(self, x: Tensor, part: str, sublayer: Callable[[Tensor], Tensor]) -> Tensor:
        """The residual stream after sublayer `part` ('attention', 'cross' or 'ffn')."""
        raise NotImplementedError(f"block {self.name!r} defines neither forward nor residual")


class Sharing(Component):
    """Decides which layers share one set of parameters."""

    kind: ClassVar[str] = "sharing"

    def assign(self, n_layers: int) -> list[int]:
        """Layer i uses parameter set assign(n)[i]; sets are numbered 0..k-1 in order."""
        raise NotImplementedError
