"""ZooModel: stacks of blocks assembled from components, with HF-style inputs and outputs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from .aux_loss import aux_loss_modules, pooled_aux_loss, reset_aux_losses
from .cache import CrossCache, KVCache, LayerCache
from .costs import kv_cache_values
from .documents import check_document_ids, document_positions, document_runs
from .input_checks import LANGS, InputChecks, check_label_values, describe, values_trusted
from .interfaces import Attention, AttentionContext, Embedding, Head, Position
from .masks import AttentionMask
from .memory import check_fits
from .outputs import StackRecord, requested_layers
from .plan import stack_role
from .spec import Spec


def flatten_choices(head: str, input_ids: Tensor | None, *others: Tensor | None) -> tuple[Any, ...]:
    """(B, C), then input_ids and the others of a multiple-choice batch as (B*C, T)."""
    if input_ids is None or input_ids.dim() != 3:
        got = None if input_ids is None else tuple(input_ids.shape)
        raise ValueError(f"head {head!r} takes input_ids of shape (batch, choices, seq), got {got}")
    B, C, T = input_ids.shape
    flat = []
    names = ("attention_mask", "token_type_ids", "position_ids", "langs")
    for name, t in zip(names, others, strict=True):
        if t is not None and tuple(t.shape) != (B, C, T):
            raise ValueError(
                f"{name} of shape {tuple(t.shape)} does not match input_ids' {(B, C, T)}"
            )
        flat.append(None if t is None else t.reshape(B * C, T))
    return (B, C), input_ids.reshape(B * C, T), *flat


def flatten_inputs(
    inputs: Mapping[str, Tensor] | None, choices: tuple[int, int]
) -> Mapping[str, Tensor] | None:
    """Per-batch attention inputs of (B, C, ...) shape as (B*C, ...), like input_ids."""
    if not inputs:
        return inputs
    return {
        k: v.flatten(0, 1) if v.dim() > 2 and tuple(v.shape[:2]) == choices else v
        for k, v in inputs.items()
    }


def kept_positions(logits_to_keep: Any, length: int) -> slice | Tensor:
    """transformers' `logits_to_keep`: an int n keeps the last n positions (0: all), a 1-D
    integer tensor the positions it lists."""
    if isinstance(logits_to_keep, int):
        return slice(-logits_to_keep, None)
    if (
        not isinstance(logits_to_keep, Tensor)
        or logits_to_keep.dim() != 1
        or logits_to_keep.dtype not in (torch.int64, torch.int32)
    ):
        got = describe(logits_to_keep)
        raise ValueError(
            f"logits_to_keep must be an int or a 1-D integer tensor of positions, got {got}"
        )
    if logits_to_keep.numel() and not bool(
        ((logits_to_keep >= -length) & (logits_to_keep < length)).all()
    ):
        raise ValueError(
            f"logits_to_keep holds positions outside [-{length}, {length}): "
            f"{logits_to_keep.tolist()}"
        )
    return logits_to_keep


@dataclass
class ModelOutput:
    """What a forward pass returns (names follow Hugging Face)."""

    last_hidden_state: Tensor
    logits: Tensor | None = None
    loss: Tensor | None = None
    encoder_last_hidden_state: Tensor | None = None
    aux_loss: Tensor | None = None  # auxiliary losses (MoE load balancing), before weighting
    # output_hidden_states / output_attentions (tuples, one entry per layer; see outputs.py)
    hidden_states: tuple[Tensor, ...] | None = None
    attentions: tuple[Tensor | None, ...] | None = None
    encoder_hidden_states: tuple[Tensor, ...] | None = None
    decoder_hidden_states: tuple[Tensor, ...] | None = None
    encoder_attentions: tuple[Tensor | None, ...] | None = None
    decoder_attentions: tuple[Tensor | None, ...] | None = None
    cross_attentions: tuple[Tensor | None, ...] | None = None
    pooler_output: Tensor | None = None  # heads that name their outputs (HF names) fill
    sentence_embedding: Tensor | None = None  # (B, D) pooled (sentence-transformers' name)
    start_logits: Tensor | None = None  # these instead of `logits`
    end_logits: Tensor | None = None

    def __getitem__(self, key: str) -> Any:
        return getattr(self, key)


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
        """Hidden states (B, T, D). With a cache, input_ids are the new tokens only and
        attention_mask (if any) covers every cached token plus the new ones. `record`
        collects hidden states and requested attention probabilities. attention_inputs:
        per-batch tensors for the attention components (ctx.inputs); langs: language ids
        for an embedding with a language table (XLM). documents (B, T): run numbers of a
        packed row (archzoo.documents), memory_documents (B, Tm) the memory's: attention
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
        x = self.embedding(  # before the cache advances: a refused position leaves it as it was
            input_ids, token_type_ids, self.position.embed(position_ids), **languages
        )
        k_pos, key_padding = position_ids, attention_mask
        if cache is not None:
            k_pos, key_padding = cache.advance(position_ids, attention_mask)
        if attention_mask is not None and getattr(self.embedding.cfg, "zero_padded", False):
            x = x * attention_mask[:, -T:, None].to(x.dtype)  # (B, T, 1): padded rows are 0
        mask = AttentionMask.build(
            T,
            k_pos.shape[1],
            causal=self.causal,
            key_padding=key_padding,
            key_docs=documents,
            device=input_ids.device,
        )
        state = self.position.prepare(position_ids, k_pos)
        ctx = AttentionContext(
            mask, self.position, state, inputs=attention_inputs or {}, input_ids=input_ids
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
                T,
                memory.shape[1],
                causal=False,
                key_padding=memory_mask,
                key_docs=memory_documents,
                query_docs=None if memory_documents is None else documents,
                device=memory.device,
            )
            cross_ctx = AttentionContext(cross_mask)
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
        if self.final_norm is not None:
            x = self.final_norm(x)
        if record is not None:
            record.final(x)
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
        record.before_layer(x)
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
            check_fits(
                int(per_token * capacity * batch * ref.element_size()),
                ref.device,
                f"a KV cache of {batch} rows by {capacity} tokens",
                "ask for a smaller batch or capacity",
            )
        layers = []
        for i in self.layer_map:
            (n_kv, head_dim), values, window = self.blocks[i].attention.cache_shapes()
            size = capacity if window is None else min(capacity, window)
            layers.append(
                LayerCache(
                    batch,
                    n_kv,
                    head_dim,
                    size,
                    window=window,
                    dtype=ref.dtype,
                    device=ref.device,
                    value_shape=values,
                )
            )
        crosses = [CrossCache() for _ in self.layer_map] if cross else None
        return KVCache(layers, crosses, batch=batch, capacity=capacity, device=ref.device)


class ZooModel(nn.Module):
    """A transformer assembled from a resolved spec."""

    hf_source: dict[str, str] | None = None  # from_hf: {"directory", "model_type"} it came from
    loaded_from: Path | None = None  # the directory from_hf or load read it from (not metadata)

    def __init__(
        self, spec: Spec, *, encoder: Stack | None, decoder: Stack | None, head: Head
    ) -> None:
        super().__init__()
        self.spec = spec
        self.encoder = encoder
        self.decoder = decoder
        self.head = head
        self._aux_groups = aux_loss_modules(self)  # components that add an auxiliary loss
        # per-batch inputs its attention layers read, accepted as forward keywords
        self._input_names = sorted(
            {n for m in self.modules() if isinstance(m, Attention) for n in m.inputs}
        )

    @property
    def family(self) -> str:
        return self.spec.family

    def forward(
        self,
        input_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        decoder_input_ids: Tensor | None = None,
        decoder_attention_mask: Tensor | None = None,
        labels: Tensor | None = None,
        position_ids: Tensor | None = None,
        *,
        cache: KVCache | None = None,
        encoder_outputs: Tensor | None = None,
        logits_to_keep: int | Tensor | None = None,
        output_hidden_states: bool = False,
        output_attentions: bool | Sequence[int] = False,
        attention_inputs: Mapping[str, Tensor] | None = None,
        langs: Tensor | None = None,
        return_logits: bool = True,
        shift_labels: Tensor | None = None,
        num_items_in_batch: float | Tensor | None = None,
        label_smoothing: float = 0.0,
        document_ids: Tensor | None = None,
        decoder_document_ids: Tensor | None = None,
        **inputs: Tensor,
    ) -> ModelOutput:
        """Run the model; `labels` (-100 ignored) add a loss.

        Decoding: `cache` (from `new_cache`) makes the decoder see only new tokens;
        `encoder_outputs` skips the encoder; `logits_to_keep=n` scores the last n positions
        (a 1-D tensor: the positions it lists, as transformers).
        `output_hidden_states` and `output_attentions` (True or layer indices) add the
        Hugging Face outputs; only the layers asked for compute their probabilities.
        `attention_inputs` are per-batch tensors attention components read by name
        (Longformer's "global_attention_mask"); every stack receives them. The names the
        model's attention layers read are keywords too (`global_attention_mask=...`, as HF).
        `langs`: a language id per token, for an embedding with a language table (XLM's
        n_langs).
        `return_logits=False` leaves `logits` None and lets the head compute the loss
        without full-vocabulary logits (the LM head does it in chunks: far less memory).
        `shift_labels` (as transformers): targets already aligned with the positions (-100
        ignored), given instead of `labels`; the loss is then the token loss alone (no
        auxiliary loss), with `label_smoothing`, and summed over scored tokens and divided by
        `num_items_in_batch` when given (gradient accumulation). `zoo train` uses it.
        `document_ids` (B, T): packed rows, several documents per row (archzoo.documents);
        attention stays inside each document and positions restart in each. An
        encoder-decoder model takes `decoder_document_ids` for the decoder rows as well.
        Labels that cross a document boundary are the caller's to ignore (-100).
        """
        if inputs:
            attention_inputs = {**(attention_inputs or {}), **self._keyword_inputs(inputs)}
        extra: dict[str, Any] = {"attention_inputs": attention_inputs}
        rec = {
            w: StackRecord(
                output_hidden_states,
                requested_layers(output_attentions, len(s.layer_map)),
                len(s.layer_map),
            )
            for w, s in (("encoder", self.encoder), ("decoder", self.decoder))
            if s is not None and (output_hidden_states or output_attentions)
        }
        enc_out = None
        choices = None
        if self.head.capabilities.choices:  # (B, C, T) inputs: the stacks see B*C sequences
            choices, input_ids, attention_mask, token_type_ids, position_ids, langs = (
                flatten_choices(
                    self.head.name, input_ids, attention_mask, token_type_ids, position_ids, langs
                )
            )
            extra["attention_inputs"] = flatten_inputs(attention_inputs, choices)
        reset_aux_losses(self._aux_groups)
        self._check_inputs(
            input_ids,
            attention_mask,
            token_type_ids,
            decoder_input_ids,
            decoder_attention_mask,
            labels,
            position_ids,
            encoder_outputs,
            label_rows=None if choices is None else choices[0],
            langs=langs,
        )
        if cache is not None and not values_trusted():  # generate's steps feed their own cache
            self._check_cache(
                cache, decoder_input_ids if self.family == "encoder-decoder" else input_ids
            )
        docs: tuple[Tensor | None, Tensor | None] = (None, None)
        if document_ids is not None or decoder_document_ids is not None:
            docs = self._documents(
                document_ids, decoder_document_ids, input_ids, decoder_input_ids, encoder_outputs
            )
            if choices is not None:
                raise ValueError(
                    f"document_ids: head {self.head.name!r} takes (batch, choices, seq) "
                    "inputs; packed rows are for token-level heads"
                )
        encoder_extra = {**extra, "langs": langs}
        if docs[0] is not None:
            encoder_extra["documents"] = docs[0]
        if self.family == "encoder":
            hidden = self.encoder(
                input_ids,
                attention_mask,
                token_type_ids,
                position_ids,
                record=rec.get("encoder"),
                **encoder_extra,
            )
            mask = attention_mask
        elif self.family == "decoder":
            hidden = self.decoder(
                input_ids,
                attention_mask,
                token_type_ids,
                position_ids,
                cache=cache,
                record=rec.get("decoder"),
                **encoder_extra,
            )
            mask = attention_mask
        else:
            enc_out = encoder_outputs
            if enc_out is None:
                enc_out = self.encoder(
                    input_ids,
                    attention_mask,
                    token_type_ids,
                    record=rec.get("encoder"),
                    **encoder_extra,
                )
            else:
                rec.pop("encoder", None)  # the encoder did not run
            if docs[1] is not None:
                extra.update(documents=docs[1], memory_documents=docs[0])
            hidden = self.decoder(
                decoder_input_ids,
                decoder_attention_mask,
                position_ids=position_ids,
                memory=enc_out,
                memory_mask=attention_mask,
                cache=cache,
                record=rec.get("decoder"),
                **extra,
            )
            mask = decoder_attention_mask
        if logits_to_keep is not None:
            keep = kept_positions(logits_to_keep, hidden.shape[1])
            hidden = hidden[:, keep]
            mask = None if mask is None else mask[:, keep]
        head_hidden = hidden
        if choices is not None:  # the head sees each example's choices together
            head_hidden = hidden.view(*choices, *hidden.shape[1:])  # (B, C, T, D)
            mask = None if mask is None else mask.view(*choices, -1)  # (B, C, T)
        ids = {"input_ids": input_ids} if self.head.capabilities.token_ids else {}  # the model's
        out = self.head(head_hidden, mask, **ids) if return_logits else None  # logits or HF names
        named = out if isinstance(out, dict) else {"logits": out}
        loss = None
        if shift_labels is not None:
            if labels is not None:
                raise ValueError("pass labels or shift_labels, not both")
            loss = self.head.token_loss(
                head_hidden,
                shift_labels,
                mask,
                logits=out if return_logits else None,
                label_smoothing=label_smoothing,
                num_items=num_items_in_batch,
                **ids,
            )
        elif labels is not None and not return_logits:
            loss = self.head.hidden_loss(head_hidden, labels, mask, **ids)
        elif labels is not None:
            if out is None or not any(k.endswith("logits") for k in named):
                raise ValueError(
                    f"head {self.head.name!r} makes no logits, so labels cannot be used"
                )
            if isinstance(out, Tensor) and out.dim() == 3:  # token-level class ids
                check_label_values(labels, out)
            loss = self.head.masked_loss(out, labels, mask)
        aux_loss = None
        if self._aux_groups:
            aux_loss, weighted = pooled_aux_loss(self._aux_groups, attention_mask)
            if loss is not None and shift_labels is None:
                loss = loss + weighted
        return ModelOutput(
            named.pop("last_hidden_state", hidden),  # a head may project it (OPT-350m)
            loss=loss,
            encoder_last_hidden_state=enc_out,
            aux_loss=aux_loss,
            **named,
            **self._recorded(rec),
        )

    def _documents(
        self,
        document_ids: Tensor | None,
        decoder_document_ids: Tensor | None,
        input_ids: Tensor | None,
        decoder_input_ids: Tensor | None,
        encoder_outputs: Tensor | None,
    ) -> tuple[Tensor | None, Tensor | None]:
        """Run numbers (archzoo.documents) of the first stack's rows and of the decoder's."""
        if self.family != "encoder-decoder":
            if decoder_document_ids is not None:
                raise ValueError(
                    f"decoder_document_ids is for encoder-decoder models; this {self.family} "
                    "model takes document_ids"
                )
            check_document_ids(document_ids, "document_ids", input_ids.shape, "input_ids")
            return document_runs(document_ids), None
        if document_ids is None or decoder_document_ids is None:
            given = "document_ids" if document_ids is not None else "decoder_document_ids"
            raise ValueError(
                f"{given} was given alone: an encoder-decoder model packs both sides, so it "
                "needs document_ids (encoder rows) and decoder_document_ids (decoder rows)"
            )
        source = input_ids if encoder_outputs is None else encoder_outputs
        of = "input_ids" if encoder_outputs is None else "encoder_outputs"
        check_document_ids(document_ids, "document_ids", source.shape[:2], of)
        check_document_ids(
            decoder_document_ids,
            "decoder_document_ids",
            decoder_input_ids.shape,
            "decoder_input_ids",
        )
        return document_runs(document_ids), document_runs(decoder_document_ids)

    def _keyword_inputs(self, inputs: Mapping[str, Any]) -> dict[str, Tensor]:
        """Keywords naming a per-batch input of this model's attention layers; others refused."""
        unknown = sorted(set(inputs) - set(self._input_names))
        if unknown:
            accepted = ", ".join(self._input_names) or "none"
            raise TypeError(
                f"forward() got unexpected keyword argument(s) {', '.join(unknown)}; "
                f"inputs this model's attention layers read: {accepted}"
            )
        for name, value in inputs.items():
            if not isinstance(value, Tensor):
                raise ValueError(f"{name} must be a tensor, got {type(value).__name__}")
        return dict(inputs)

    def _recorded(self, rec: dict[str, StackRecord]) -> dict[str, Any]:
        """ModelOutput fields of the records: HF names per family."""
        out: dict[str, Any] = {}
        for which, record in rec.items():
            hidden, attentions, cross = record.outputs()
            if self.family != "encoder-decoder":
                out.update(hidden_states=hidden, attentions=attentions)
                continue
            out[f"{which}_hidden_states"], out[f"{which}_attentions"] = hidden, attentions
            if which == "decoder":
                out["cross_attentions"] = cross
        return out

    def _check_inputs(
        self,
        input_ids: Tensor | None,
        attention_mask: Tensor | None,
        token_type_ids: Tensor | None,
        decoder_input_ids: Tensor | None,
        decoder_attention_mask: Tensor | None,
        labels: Tensor | None,
        position_ids: Tensor | None,
        encoder_outputs: Tensor | None,
        *,
        label_rows: int | None = None,
        langs: Tensor | None = None,
    ) -> None:
        """Shapes, dtypes and batch sizes of every input; id ranges read once (input_checks).
        `label_rows`: rows of `labels` when they differ from the inputs' (multiple choice)."""
        # the weights' device, where ids must be (not re-checked on generate's own steps; not
        # under torch.compile either, whose dynamo cannot read values_trusted's ContextVar)
        trusted = torch.compiler.is_compiling() or values_trusted()
        checks = InputChecks(None if trusted else next(self.parameters()).device)
        vocab = self.spec.data["vocab_size"]
        if self.family != "encoder-decoder":
            stack = self.encoder if self.encoder is not None else self.decoder
            B, T = checks.ids(input_ids, "input_ids", vocab)
            checks.keep_mask(attention_mask, "attention_mask", B, "input_ids")
            checks.segments(token_type_ids, (B, T), stack.embedding.segment_types())
            checks.segments(langs, (B, T), stack.embedding.languages(), LANGS)
            limit = stack.position.position_limit()
            checks.positions(position_ids, (B, T), limit, "position_ids")
            if label_rows is None:
                checks.labels(labels, B, "input_ids")
            else:
                checks.labels(labels, label_rows, "input_ids (batch, choices, seq)")
            checks.run()
            return
        if decoder_input_ids is None:
            raise ValueError("an encoder-decoder model needs decoder_input_ids")
        B, T = checks.ids(decoder_input_ids, "decoder_input_ids", vocab)
        checks.keep_mask(decoder_attention_mask, "decoder_attention_mask", B, "decoder_input_ids")
        limit = self.decoder.position.position_limit()
        checks.positions(position_ids, (B, T), limit, "position_ids")
        checks.labels(labels, B, "decoder_input_ids")
        if encoder_outputs is None:
            source, (rows, length) = "input_ids", checks.ids(input_ids, "input_ids", vocab)
            checks.segments(token_type_ids, (rows, length), self.encoder.embedding.segment_types())
            checks.segments(langs, (rows, length), self.encoder.embedding.languages(), LANGS)
        else:
            source, rows = "encoder_outputs", encoder_outputs.shape[0]
        checks.keep_mask(attention_mask, "attention_mask", rows, source)
        if rows != B:
            raise ValueError(f"decoder_input_ids has batch size {B} but {source} has {rows}")
        checks.run()

    def _check_cache(self, cache: Any, ids: Tensor) -> None:
        """`cache` is this model's (new_cache) for the rows of `ids`, in the weights' dtype."""
        if self.decoder is None:
            raise ValueError(f"a {self.family} model does not decode; cache must be None")
        if not isinstance(cache, KVCache):
            raise TypeError(
                "cache must be a KVCache from model.new_cache(batch, capacity), "
                f"got {type(cache).__name__}"
            )
        of = "decoder_input_ids" if self.family == "encoder-decoder" else "input_ids"
        rows = cache.positions.shape[0]
        if rows != ids.shape[0]:
            raise ValueError(
                f"cache was made for batch size {rows} but {of} has batch size {ids.shape[0]}; "
                f"make one with model.new_cache({ids.shape[0]}, capacity)"
            )
        ref = next(self.decoder.parameters())  # as new_cache picks its dtype and device
        layers = len(self.decoder.layer_map)
        keys = cache.layers[0].k if cache.layers else None
        cross = stack_role(self.family, "decoder").cross
        if len(cache.layers) != layers or (cache.cross is not None) != cross:
            raise ValueError(
                f"cache was made by another model ({len(cache.layers)} layers); this one decodes "
                f"with {layers}: make one with model.new_cache(batch, capacity)"
            )
        if keys is not None and (keys.dtype != ref.dtype or keys.device != ref.device):
            raise ValueError(
                f"cache holds {keys.dtype} on {keys.device} but the model's weights are "
                f"{ref.dtype} on {ref.device} (moved or cast after new_cache?); make a new one "
                "with model.new_cache(batch, capacity)"
            )
        if keys is not None and keys.is_inference() and not torch.is_inference_mode_enabled():
            raise ValueError(
                "cache was made under torch.inference_mode(), so it cannot be written outside "
                "it; run this forward under inference_mode too, or make the cache outside it"
            )

    def new_cache(self, batch: int, capacity: int) -> KVCache:
        """An empty KV cache for the decoder stack (with cross-attention slots if any)."""
        if self.decoder is None:
            raise ValueError(f"a {self.family} model does not decode; it has no KV cache")
        cross = stack_role(self.family, "decoder").cross
        return self.decoder.new_cache(batch, capacity, cross=cross)

    def stale_cache(self, cached: int, total: int) -> bool:
        """Whether the decoder's position scheme needs its cached keys recomputed at `total`."""
        return self.decoder is not None and self.decoder.position.stale_cache(cached, total)

    def supports_cache(self) -> bool:
        """Whether every decoder layer's attention can decode with a KV cache."""
        return self.decoder is not None and self.decoder.cache_refusal() is None

    def generate(self, input_ids: Tensor, **kwargs: Any) -> Tensor:
        """Generate tokens with transformers' conventions; see archzoo.generation.generate."""
        from .generation import generate

        return generate(self, input_ids, **kwargs)

    def num_parameters(self) -> int:
        """Total parameter count, tied or shared weights counted once."""
        return sum(p.numel() for p in self.parameters())

    def summary(self) -> dict[str, Any]:
        """Name, family and parameter counts per part (shared weights counted once)."""
        seen: set[int] = set()
        parts: dict[str, int] = {}
        for part_name, module in self.named_children():
            n = 0
            for p in module.parameters():
                if id(p) not in seen:
                    seen.add(id(p))
                    n += p.numel()
            parts[part_name] = n
        return {
            "name": self.spec.name,
            "family": self.family,
            "params": self.num_parameters(),
            "parts": parts,
        }

    def extra_repr(self) -> str:
        return f"name={self.spec.name!r}, family={self.family!r}"
