"""Stack: embedding, positions and blocks run over one sequence of tokens (an encoder or a decoder)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from ..memory import check_fits
from ..parts.cache import CrossCache, KVCache, LayerCache, PartsCache, StateCache
from ..parts.costs import kv_cache_values, state_bytes
from ..parts.input_checks import values_trusted
from ..parts.interfaces import Attention, AttentionContext, Embedding, Position
from ..parts.masks import AttentionMask
from ..parts.outputs import StackRecord
from ..parts.stream import StreamState, pair_pool, pool_index, upsample
from .documents import document_positions


class Stack(nn.Module):
    """Embedding, position, blocks (possibly shared) and an optional final norm; layers may
    rotate or bias by positions of their own (`layer_positions[position_of[j]]`)."""

    def __init__(
        self,
        *,
        embedding: Embedding,
        position: Position,
        blocks: list[nn.Module],
        layer_map: list[int],
        final_norm: nn.Module | None,
        causal: bool,
        checkpointing: bool = False,
        layer_positions: list[Position] | None = None,
        position_of: list[int | None] | None = None,
    ) -> None:
        super().__init__()
        self.embedding = embedding
        self.position = position
        self.layer_positions = nn.ModuleList(layer_positions or [])
        self.position_of = position_of or [None] * len(layer_map)
        self.blocks = nn.ModuleList(blocks)
        self.layer_map = layer_map
        self.final_norm = final_norm
        self.causal = causal
        self.checkpointing = checkpointing
        self.prefix = embedding.prefix_tokens  # vectors the embedding puts before the tokens
        self.streams = embedding.predict_streams  # predicting streams it puts after them
        caps = position.capabilities
        if self.prefix and (causal or caps.rotate or caps.bias):
            raise ValueError(
                f"embedding {embedding.name!r} places {self.prefix} vectors before the tokens, "
                "which a causal stack or a rotating / biasing position cannot place: use it in "
                "a bidirectional stack with embedded positions (PEGASUS-X's encoder)"
            )
        # what each layer use does to the residual stream first (pool, upsample), or None
        attentions = [blocks[i].attention for i in layer_map]
        self.steps = [a.stream_step(a.cfg) for a in attentions]
        self.stepped = any(step is not None for step in self.steps)
        # whole rows only: a step that changes the length or sets the first position apart
        self.whole_rows = any(
            step is not None
            and (step.pool is not None or step.upsample_from is not None or step.separate_first)
            for step in self.steps
        )
        if self.stepped:
            self._check_steps(causal, caps)

    def _check_steps(self, causal: bool, caps: object) -> None:
        """Refuse stream steps a stack cannot take: a causal stack, a rotating or biasing
        position (neither knows pooled positions), global tokens, an upsampling without an
        earlier layer to add."""
        if causal or caps.rotate or caps.bias or self.prefix or self.streams:
            raise ValueError(
                "layers that pool or upsample the stream (Funnel's pooling) need a "
                "bidirectional stack whose position embeds or is none, without global tokens "
                "or predicting streams"
            )
        for j, step in enumerate(self.steps):
            if step is None or step.upsample_from is None:
                continue
            if not 0 <= step.upsample_from < j:
                raise ValueError(
                    f"layer {j}: upsample_from {step.upsample_from} is not an earlier layer"
                )

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        position_ids: Tensor | None = None,
        memory: Tensor | None = None,
        memory_mask: Tensor | None = None,
        cache: KVCache | None = None,
        record: StackRecord | None = None,
        attention_inputs: Mapping[str, Tensor] | None = None,
        langs: Tensor | None = None,
        documents: Tensor | None = None,
        memory_documents: Tensor | None = None,
    ) -> Tensor:
        """Hidden states (B, T, D), or (B, (1 + n) T, D) with the embedding's n predicting
        streams after the tokens (`split_streams` parts them). With a cache, input_ids are
        the new tokens only and attention_mask (if any) covers every cached token plus the
        new ones. `record`
        collects hidden states and requested attention probabilities. attention_inputs:
        per-batch tensors for the attention components (ctx.inputs); langs: language ids
        for an embedding with a language table (XLM). documents (B, T): run numbers of a
        packed row (archzoo.model.documents), memory_documents (B, Tm) the memory's: attention
        stays inside a document and positions restart in each."""
        B, T = input_ids.shape
        past = 0 if cache is None else cache.length
        if documents is not None and cache is not None:
            raise ValueError(
                "document_ids (packed rows) cannot be used with a KV cache: decode each "
                "document in a row of its own"
            )
        if position_ids is None:
            if documents is None:
                position_ids = self.position.position_ids(input_ids, past)
            else:
                position_ids = document_positions(documents)
        languages = {} if langs is None else {"langs": langs}  # only embeddings that have them
        if self.embedding.inputs:  # the per-batch inputs it reads (ERNIE's task types)
            given = {**(attention_inputs or {}), "attention_mask": attention_mask}
            languages["inputs"] = {n: given[n] for n in self.embedding.inputs if n in given}
        x = self.embedding(  # before the cache advances: a refused position leaves it as it was
            input_ids, token_type_ids, self.position.embed(position_ids), **languages
        )
        if self.streams:  # (B, (1 + n) T, D): the streams after the tokens
            if documents is not None:
                raise ValueError(
                    "document_ids (packed rows) cannot be used with predicting streams "
                    f"(embedding.predict_streams {self.streams}): give one document per row"
                )
            ahead = self.position.embed(position_ids + 1)  # each token's next position
            ahead = torch.zeros_like(x) if ahead is None else ahead
            x = torch.cat([x, self.embedding.stream_vectors(ahead)], dim=1)
        k_pos, key_padding = position_ids, attention_mask
        if cache is not None:
            k_pos, key_padding = cache.advance(position_ids, attention_mask)
        if attention_mask is not None and getattr(self.embedding.cfg, "zero_padded", False):
            x = x * attention_mask[:, -T:, None].to(x.dtype)  # (B, T, 1): padded rows are 0
        prefix = self.prefix
        if prefix:  # the embedding's leading vectors are never padding
            if documents is not None or cache is not None:
                raise ValueError(
                    f"embedding {self.embedding.name!r} places vectors before the tokens: "
                    "packed rows (document_ids) and a KV cache cannot be used with it"
                )
            if key_padding is not None:
                key_padding = F.pad(key_padding.to(torch.bool), (prefix, 0), value=True)
        mask = AttentionMask.build(
            T + prefix,
            k_pos.shape[1] + prefix,
            causal=self.causal,
            key_padding=key_padding,
            key_docs=documents,
            device=input_ids.device,
        )
        state = self.position.prepare(position_ids, k_pos)
        ctx = AttentionContext(
            mask,
            self.position,
            state,
            inputs=attention_inputs or {},
            input_ids=input_ids,
            prefix=prefix,
            embeddings=x,
        )
        own = [  # the layers' own positions, prepared once per forward like the stack's
            replace(ctx, position=p, position_state=p.prepare(position_ids, k_pos))
            for p in self.layer_positions
        ]
        layer_ctxs = [ctx if i is None else own[i] for i in self.position_of]
        cross_ctx = None
        if memory is not None:
            if (memory_documents is None) != (documents is None):
                raise ValueError(
                    "cross-attention of packed rows needs the documents of both sides: "
                    "documents (the queries') and memory_documents (the memory's)"
                )
            cross_mask = AttentionMask.build(
                T * (1 + self.streams),  # every stream's rows query the memory
                memory.shape[1],
                causal=False,
                key_padding=memory_mask,
                key_docs=memory_documents,
                query_docs=None if memory_documents is None else documents,
                device=memory.device,
            )
            cross_ctx = AttentionContext(cross_mask)
        if self.stepped:
            if cache is not None or memory is not None:
                raise ValueError(
                    "layers with stream steps (Funnel's pooling) run a whole sequence at "
                    "once: no KV cache or cross-attention"
                )
            if documents is not None and self.whole_rows:
                raise ValueError(
                    "document_ids (packed rows): layers that pool or upsample the stream, "
                    "or set its first position apart (Funnel), need a row per sequence"
                )
            x = self._stream_layers(x, ctx, key_padding, token_type_ids, record, documents)
            return self._finish(x, record)
        recompute = self.checkpointing and self.training and torch.is_grad_enabled()
        per_layer = self.position.per_layer
        blocks = list(self.blocks)  # indexing a ModuleList costs a call per layer
        for j, i in enumerate(self.layer_map):
            lctx = layer_ctxs[j]
            if per_layer and self.position_of[j] is None:  # parameters per layer (UMT5)
                lctx = replace(ctx, position_state=self.position.layer_state(state, j))
            if record is not None:
                x = self._recorded_layer(j, i, x, lctx, memory, cross_ctx, cache, record)
                continue
            if recompute:  # keep only block inputs; recompute the rest in backward
                x = checkpoint(blocks[i], x, lctx, memory, cross_ctx, use_reentrant=False)
                continue
            if cache is None:
                x = blocks[i](x, lctx, memory, cross_ctx)
                continue
            layer_ctx = lctx.with_cache(cache.layers[j])
            layer_cross = cross_ctx.with_cache(cache.cross[j]) if cross_ctx is not None else None
            x = blocks[i](x, layer_ctx, memory, layer_cross)
        return self._finish(x, record)

    def _finish(self, x: Tensor, record: StackRecord | None) -> Tensor:
        """The final norm, the tokens' states without the prefix, recorded."""
        if self.final_norm is not None:
            x = self.final_norm(x)
        if self.prefix:
            x = x[:, self.prefix :]  # (B, T, D): the tokens' states
        if record is not None:
            record.final(self.split_streams(x)[0])
        return x

    def split_streams(self, x: Tensor) -> tuple[Tensor, Tensor | None]:
        """The tokens' states (B, T, D) and the predicting streams' (B, n, T, D), or None,
        of this stack's output (B, (1 + n) T, D)."""
        if not self.streams:
            return x, None
        B, L, D = x.shape
        T = L // (1 + self.streams)
        return x[:, :T], x[:, T:].view(B, self.streams, T, D)

    def _stream_layers(
        self,
        x: Tensor,
        ctx: AttentionContext,
        key_padding: Tensor | None,
        token_type_ids: Tensor | None,
        record: StackRecord | None,
        documents: Tensor | None = None,
    ) -> Tensor:
        """The layers of a stack whose stream changes length: before a layer that pools, the
        stream (its positions and padding) is pooled in pairs, the layer's queries and
        residual are the pooled stream and its keys the stream before (unless pool_keys);
        before a layer that upsamples, the stream is repeated back to the input length and
        the stream kept after an earlier layer is added."""
        B, T, _ = x.shape
        full = torch.arange(T, device=x.device)
        index, level, keep = full, 0, key_padding  # keep: (B, T') real positions or None
        wanted = {s.upsample_from for s in self.steps if s is not None}
        kept: dict[int, Tensor] = {}
        recompute = self.checkpointing and self.training and torch.is_grad_enabled()
        for j, i in enumerate(self.layer_map):
            step = self.steps[j]
            q_index, q_level, k_keep, keys = index, level, keep, None
            if step is not None and step.upsample_from is not None:
                sep, cut = step.separate_first, step.truncate
                x = upsample(x, 2**level, T, sep, cut) + kept[step.upsample_from]
                index, level, keep = full, 0, key_padding
                q_index, q_level, k_keep = index, level, keep
            k_index, k_level = index, level
            if step is not None and step.pool is not None:
                level += 1  # as transformers counts blocks, whether or not it pools
                q_level = level
                sep, cut = step.separate_first, step.truncate
                if x.shape[1] > (2 if sep else 1):  # transformers keeps a stream this short
                    pooled = pair_pool(x, step.pool, sep, cut)  # (B, T' / 2, D)
                    index = q_index = pool_index(index, sep, cut)
                    if keep is not None:  # a pooled position is real if both of its pair are
                        keep = pair_pool(keep.to(x.dtype), "min", sep, cut) > 0.5
                    if step.pool_keys:
                        k_index, k_level, k_keep = index, level, keep
                    else:
                        keys = x
                    x = pooled
            mask = AttentionMask.build(  # documents: only where the stream keeps its length
                x.shape[1],
                k_index.shape[0],
                causal=False,
                key_padding=k_keep,
                key_docs=documents,
                device=x.device,
            )
            sep = step.separate_first if step is not None else False
            state = StreamState(q_index, k_index, q_level, k_level, sep, keys, token_type_ids)
            lctx = replace(ctx, mask=mask, stream=state)
            if record is not None:
                x = self._recorded_layer(j, i, x, lctx, None, None, None, record)
            elif recompute:
                x = checkpoint(self.blocks[i], x, lctx, None, None, use_reentrant=False)
            else:
                x = self.blocks[i](x, lctx, None, None)
            if j in wanted:
                kept[j] = x
        return x

    def _recorded_layer(
        self,
        j: int,
        i: int,
        x: Tensor,
        ctx: AttentionContext,
        memory: Tensor | None,
        cross_ctx: AttentionContext | None,
        cache: KVCache | None,
        record: StackRecord,
    ) -> Tensor:
        """Run layer use j (block i) keeping its input and, if asked, its probabilities."""
        tokens = self.split_streams(x)[0]  # the tokens' states, without streams or prefix
        record.before_layer(tokens[:, self.prefix :] if self.prefix else tokens)
        if cache is not None:
            ctx = ctx.with_cache(cache.layers[j])
            if cross_ctx is not None:
                cross_ctx = cross_ctx.with_cache(cache.cross[j])
        ctx, cross_ctx = record.layer_ctx(j, ctx, cross_ctx)
        block = self.blocks[i]
        x = block(x, ctx, memory, cross_ctx)
        record.after_layer(j, block.attention.name, ctx, cross_ctx)
        return x

    def cache_refusal(self) -> str | None:
        """Why this stack cannot decode with a KV cache (the first layer that cannot), or None."""
        for j, i in enumerate(self.layer_map):
            attention = self.blocks[i].attention
            if not attention.capabilities.kv_cache:
                return (
                    f"layer {j}: attention {attention.name!r} cannot use a KV cache "
                    "(its capabilities say kv_cache=False); decode without one (use_cache=False)"
                )
        return None

    def new_cache(self, batch: int, capacity: int, *, cross: bool = False) -> KVCache:
        """An empty static cache for `batch` rows and up to `capacity` tokens."""
        refused = self.cache_refusal()
        if refused is not None:
            raise ValueError(refused)
        for name, value in (("batch", batch), ("capacity", capacity)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"new_cache: {name} must be an integer >= 1, got {value!r}")
        ref = next(self.parameters())
        if not values_trusted():  # generate checked this cache with its token buffers already
            per_token = kv_cache_values(self, capacity) or 0.0
            states = sum(state_bytes(self, ref.element_size()))  # recurrent mixers, per row
            check_fits(
                int(per_token * capacity * batch * ref.element_size()) + batch * states,
                ref.device,
                f"a KV cache of {batch} rows by {capacity} tokens",
                "ask for a smaller batch or capacity",
            )
        layers = [
            layer_cache(self.blocks[i].attention, batch, capacity, ref) for i in self.layer_map
        ]
        crosses = [CrossCache() for _ in self.layer_map] if cross else None
        return KVCache(layers, crosses, batch=batch, capacity=capacity, device=ref.device)


def layer_cache(
    attention: Attention, batch: int, capacity: int, ref: Tensor
) -> LayerCache | StateCache | PartsCache:
    """One layer's empty cache: its mixers' side by side, a recurrent state, or keys and values."""
    parts = attention.cache_parts()
    if parts:
        return PartsCache([layer_cache(p, batch, capacity, ref) for p in parts])
    state = attention.state_shapes()
    if state is not None:  # a recurrent mixer: its state instead of keys and values
        return StateCache(state, batch, dtype=ref.dtype, device=ref.device)
    (n_kv, head_dim), values, window = attention.cache_shapes()
    size = capacity if window is None else min(capacity, window)
    return LayerCache(
        batch,
        n_kv,
        head_dim,
        size,
        window=window,
        dtype=ref.dtype,
        device=ref.device,
        value_shape=values,
    )
