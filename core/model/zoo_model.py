"""ZooModel: stacks of blocks assembled from components, with HF-style inputs and outputs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from torch import Tensor, nn

from ..generation.decode import generate
from ..parts.cache import KVCache
from ..parts.forward_inputs import ForwardBatch, kept_positions
from ..parts.input_checks import values_trusted
from ..parts.interfaces import Attention, Block, Embedding, Head
from ..parts.outputs import StackRecord, requested_layers
from ..parts.registry import check_attention_impl, check_mixer_impl, get_registry
from ..specs.plan import stack_role
from ..specs.spec import Spec
from .aux_loss import aux_loss_modules, pooled_aux_loss, reset_aux_losses
from .checks import check_cache, check_inputs
from .documents import packed_runs
from .stack import Stack
from .streams import stream_outputs


@dataclass
class ModelOutput:
    """What a forward pass returns (names follow Hugging Face)."""

    last_hidden_state: Tensor
    logits: Tensor | None = None
    loss: Tensor | None = None
    # (B, n - 1, T, V): the LM head's logits of predicting streams 1.. (ProphetNet's ngram)
    logits_ngram: Tensor | None = None
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


class ZooModel(nn.Module):
    """A transformer assembled from a resolved spec.

    `forward` takes Hugging Face's inputs (`input_ids`, `attention_mask`, `token_type_ids`,
    `decoder_input_ids`, `decoder_attention_mask`, `position_ids`) and `labels` (-100
    ignored) for a loss, and these keywords:

    - `cache` (from `new_cache`) makes the decoder see only new tokens; `encoder_outputs`
      skips the encoder; `logits_to_keep=n` scores the last n positions (a 1-D tensor: the
      positions it lists, as transformers).
    - `output_hidden_states` and `output_attentions` (True or layer indices) add the Hugging
      Face outputs; only the layers asked for compute their probabilities.
    - `attention_inputs` are per-batch tensors attention components read by name
      (Longformer's "global_attention_mask"); every stack receives them. The names the
      model's attention layers read are keywords too (`global_attention_mask=...`, as HF).
    - `langs`: a language id per token, for an embedding with a language table (XLM's
      n_langs).
    - `return_logits=False` leaves `logits` None and lets the head compute the loss without
      full-vocabulary logits (the LM head does it in chunks: far less memory).
    - `shift_labels` (as transformers): targets already aligned with the positions (-100
      ignored), given instead of `labels`; the loss is then the token loss alone (no
      auxiliary loss), with `label_smoothing`, and summed over scored tokens and divided by
      `num_items_in_batch` when given (gradient accumulation). `zoo train` uses it.
    - `document_ids` (B, T): packed rows, several documents per row (archzoo.model.documents);
      attention stays inside each document and positions restart in each. An
      encoder-decoder model takes `decoder_document_ids` for the decoder rows as well.
      Labels that cross a document boundary are the caller's to ignore (-100).

    The head decides what its inputs look like (`Head.prepare_batch`: multiple choice takes
    (B, C, T)) and routes the labels to its loss (`Head.outputs`).
    """

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
        # per-batch inputs its attention layers (and embeddings, blocks) read, accepted as keywords
        self._input_names = sorted(
            {
                n
                for m in self.modules()
                if isinstance(m, Attention | Block | Embedding)
                for n in m.inputs
            }
            - {"attention_mask"}  # a forward argument of its own (ESM's token dropout reads it)
        )

    @property
    def family(self) -> str:
        return self.spec.family

    @property
    def attention_impl(self) -> str | dict[str, str]:
        """The kernel the attention layers run: one name, or {stack: name} where they differ."""
        names = {
            stack: sorted({m.attention_impl for m in part.modules() if isinstance(m, Attention)})
            for stack, part in (("encoder", self.encoder), ("decoder", self.decoder))
            if part is not None
        }
        every = sorted({n for ns in names.values() for n in ns})
        if len(every) <= 1:
            return every[0] if every else "auto"
        return {stack: "/".join(ns) for stack, ns in names.items()}

    def set_attention_impl(self, name: str, *, stack: str | None = None) -> ZooModel:
        """Run the attention layers (of `stack`, "encoder" or "decoder", when given) with the
        kernel registered as `name` (archzoo.list_attention_impls()); returns the model."""
        check_attention_impl(name, self._registry())
        parts = {"encoder": self.encoder, "decoder": self.decoder}
        if stack is not None and parts.get(stack) is None:
            have = [k for k, v in parts.items() if v is not None]
            raise ValueError(f"set_attention_impl: stack {stack!r} is not one of {have}")
        for part in [parts[stack]] if stack is not None else parts.values():
            for m in part.modules() if part is not None else ():
                if isinstance(m, Attention):
                    m.set_attention_impl(name)
        return self

    def set_mixer_impl(self, name: str) -> ZooModel:
        """Let the recurrent mixer layers use the optional kernels `name` allows
        (archzoo.list_mixer_impls(): "auto", "torch" or one mixer kernel); returns the model."""
        check_mixer_impl(name, self._registry())
        for m in self.modules():
            if isinstance(m, Attention) and m.state_shapes() is not None:
                m.mixer_impl = name
        return self

    def _registry(self) -> Any:
        plan = getattr(self.spec, "plan", None)
        return plan.registry if plan is not None else get_registry()

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
        """Run the model; `labels` (-100 ignored) add a loss. Every keyword is described in
        the class docstring (`help(archzoo.ZooModel)`)."""
        attention_inputs = self._attention_inputs(attention_inputs, inputs)
        batch = ForwardBatch(
            input_ids,
            attention_mask,
            token_type_ids,
            position_ids,
            langs,
            decoder_input_ids,
            decoder_attention_mask,
            attention_inputs,
            document_ids,
            decoder_document_ids,
            labels,
            shift_labels,
            num_items_in_batch,
            label_smoothing,
            return_logits,
        )
        batch = self._checked(self.head.prepare_batch(batch), cache, encoder_outputs)
        rec = self._records(output_hidden_states, output_attentions)
        reset_aux_losses(self._aux_groups)
        hidden, mask, memory = self._run_stacks(batch, cache, encoder_outputs, rec)
        last_stack = self.decoder if self.decoder is not None else self.encoder
        hidden, streams = last_stack.split_streams(hidden)
        if logits_to_keep is not None:
            keep = kept_positions(logits_to_keep, hidden.shape[1])
            hidden, mask = hidden[:, keep], None if mask is None else mask[:, keep]
            streams = None if streams is None else streams[:, :, keep]
        if streams is not None and self.head.capabilities.generates:
            named, loss = stream_outputs(self.head, streams, mask, batch)
        else:
            named, loss = self.head.outputs(hidden, mask, batch)
        loss, aux_loss = self._aux_loss(loss, batch.attention_mask, add=shift_labels is None)
        last = named.pop("last_hidden_state", hidden)  # a head may project it (OPT-350m)
        extra = {"encoder_last_hidden_state": memory, **named, **self._recorded(rec)}
        return ModelOutput(last, loss=loss, aux_loss=aux_loss, **extra)

    def _checked(
        self, batch: ForwardBatch, cache: KVCache | None, encoder_outputs: Tensor | None
    ) -> ForwardBatch:
        """The batch after the checks of every input and the cache; packed rows' documents
        filled in."""
        check_inputs(self, batch, encoder_outputs)
        if cache is not None and not values_trusted():  # generate's steps feed their own cache
            two = self.family == "encoder-decoder"
            check_cache(self, cache, batch.decoder_input_ids if two else batch.input_ids)
        if batch.document_ids is None and batch.decoder_document_ids is None:
            return batch
        if batch.choices is not None:
            raise ValueError(
                f"document_ids: head {self.head.name!r} takes (batch, choices, seq) "
                "inputs; packed rows are for token-level heads"
            )
        docs = packed_runs(
            self.family,
            batch.document_ids,
            batch.decoder_document_ids,
            batch.input_ids,
            batch.decoder_input_ids,
            encoder_outputs,
        )
        return replace(batch, documents=docs[0], decoder_documents=docs[1])

    def _records(
        self, hidden_states: bool, attentions: bool | Sequence[int]
    ) -> dict[str, StackRecord]:
        """A record per stack of what output_hidden_states / output_attentions ask for."""
        if not (hidden_states or attentions):
            return {}
        return {
            w: StackRecord(
                hidden_states, requested_layers(attentions, len(s.layer_map)), len(s.layer_map)
            )
            for w, s in (("encoder", self.encoder), ("decoder", self.decoder))
            if s is not None
        }

    def _run_stacks(
        self,
        batch: ForwardBatch,
        cache: KVCache | None,
        encoder_outputs: Tensor | None,
        rec: dict[str, StackRecord],
    ) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """The last stack's hidden states (B, T, D), the mask over them, and the memory (an
        encoder-decoder model's encoder output): every family runs its stacks this one way."""
        source, target = batch.stack_inputs(self.family == "encoder-decoder")
        memory = encoder_outputs if source is not None else None
        if source is not None and memory is None:
            memory = self.encoder(**source, record=rec.get("encoder"))
        elif source is not None:
            rec.pop("encoder", None)  # the encoder did not run
        role = "decoder" if self.decoder is not None else "encoder"
        stack = self.decoder if self.decoder is not None else self.encoder
        decoding = {"cache": cache} if self.decoder is not None else {}
        hidden = stack(**target, memory=memory, record=rec.get(role), **decoding)
        mask = target["attention_mask"]
        if mask is not None and mask.shape[-1] != hidden.shape[1]:
            mask = None  # a stack that pooled its stream (Funnel): the input's mask is not its
        return hidden, mask, memory

    def _aux_loss(
        self, loss: Tensor | None, attention_mask: Tensor | None, *, add: bool
    ) -> tuple[Tensor | None, Tensor | None]:
        """The auxiliary loss (MoE load balancing), weighted into `loss` when `add`."""
        if not self._aux_groups:
            return loss, None
        aux_loss, weighted = pooled_aux_loss(self._aux_groups, attention_mask)
        if loss is not None and add:
            loss = loss + weighted
        return loss, aux_loss

    def _attention_inputs(
        self, given: Mapping[str, Tensor] | None, keywords: Mapping[str, Any]
    ) -> Mapping[str, Tensor] | None:
        """`attention_inputs` with the keywords that name one (`global_attention_mask=`)."""
        return {**(given or {}), **self._keyword_inputs(keywords)} if keywords else given

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
        """Generate tokens with transformers' conventions; see archzoo.generation.decode.generate."""
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
