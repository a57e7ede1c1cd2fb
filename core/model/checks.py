"""The checks `ZooModel.forward` runs before any work: every input's shape, dtype and batch
size (ids read once), and that a KV cache is this model's. `model` is the ZooModel
(zoo_model.py imports this file; this file does not import it)."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from ..parts.cache import KVCache
from ..parts.forward_inputs import ForwardBatch
from ..parts.input_checks import LANGS, InputChecks, values_trusted
from ..specs.plan import stack_role


def check_inputs(model: nn.Module, batch: ForwardBatch, encoder_outputs: Tensor | None) -> None:
    """Shapes, dtypes and batch sizes of every input; id ranges read once (input_checks).
    Multiple choice: `labels` have a row per example, the inputs one per choice."""
    input_ids, attention_mask, token_type_ids = (
        batch.input_ids,
        batch.attention_mask,
        batch.token_type_ids,
    )
    decoder_input_ids, decoder_attention_mask = (
        batch.decoder_input_ids,
        batch.decoder_attention_mask,
    )
    labels, position_ids, langs = batch.labels, batch.position_ids, batch.langs
    label_rows = None if batch.choices is None else batch.choices[0]
    # the weights' device, where ids must be (not re-checked on generate's own steps; not
    # under torch.compile either, whose dynamo cannot read values_trusted's ContextVar)
    trusted = torch.compiler.is_compiling() or values_trusted()
    checks = InputChecks(None if trusted else next(model.parameters()).device)
    vocab = model.spec.data["vocab_size"]
    if model.family != "encoder-decoder":
        stack = model.encoder if model.encoder is not None else model.decoder
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
    # the decoder's own table (FSMT's target vocabulary may differ from the source's)
    B, T = checks.ids(
        decoder_input_ids, "decoder_input_ids", model.decoder.embedding.dims.vocab_size
    )
    checks.keep_mask(decoder_attention_mask, "decoder_attention_mask", B, "decoder_input_ids")
    limit = model.decoder.position.position_limit()
    checks.positions(position_ids, (B, T), limit, "position_ids")
    checks.labels(labels, B, "decoder_input_ids")
    if encoder_outputs is None:
        source, (rows, length) = "input_ids", checks.ids(input_ids, "input_ids", vocab)
        checks.segments(token_type_ids, (rows, length), model.encoder.embedding.segment_types())
        checks.segments(langs, (rows, length), model.encoder.embedding.languages(), LANGS)
    else:
        source, rows = "encoder_outputs", encoder_outputs.shape[0]
    checks.keep_mask(attention_mask, "attention_mask", rows, source)
    if rows != B:
        raise ValueError(f"decoder_input_ids has batch size {B} but {source} has {rows}")
    checks.run()


def check_cache(model: nn.Module, cache: Any, ids: Tensor) -> None:
    """`cache` is this model's (new_cache) for the rows of `ids`, in the weights' dtype."""
    if model.decoder is None:
        raise ValueError(f"a {model.family} model does not decode; cache must be None")
    if not isinstance(cache, KVCache):
        raise TypeError(
            "cache must be a KVCache from model.new_cache(batch, capacity), "
            f"got {type(cache).__name__}"
        )
    of = "decoder_input_ids" if model.family == "encoder-decoder" else "input_ids"
    rows = cache.positions.shape[0]
    if rows != ids.shape[0]:
        raise ValueError(
            f"cache was made for batch size {rows} but {of} has batch size {ids.shape[0]}; "
            f"make one with model.new_cache({ids.shape[0]}, capacity)"
        )
    ref = next(model.decoder.parameters())  # as new_cache picks its dtype and device
    layers = len(model.decoder.layer_map)
    keys = cache.layers[0].buffer() if cache.layers else None
    cross = stack_role(model.family, "decoder").cross
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
