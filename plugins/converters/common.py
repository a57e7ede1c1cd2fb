"""Table parts shared by the Hugging Face converters."""

from __future__ import annotations

from collections.abc import Mapping

from archzoo.converter import Values, parse_fields
from archzoo.hf_tensors import TensorTable, parse_rules

from . import paths
from .rope import rope_parameters as rope_parameters  # re-exported: its old home

PATHS = {k: v for k, v in vars(paths).items() if k.isupper()}

ACTIVATION = Values(
    {
        "gelu": "gelu",
        "gelu_new": "gelu_tanh",
        "gelu_fast": "gelu_tanh",
        "gelu_pytorch_tanh": "gelu_tanh",
        "relu": "relu",
        "silu": "silu",
        "swish": "silu",
    }
)

# The size keys most HF types spell the same way (BERT, Llama, NeoX, ALBERT).
SIZES = parse_fields(
    """
    vocab_size                  vocab_size
    hidden_size                 d_model
    num_hidden_layers           n_layers
    num_attention_heads         n_heads
    intermediate_size           d_ff
    """
)
# Every type: padding id, and whether the LM head reuses the token table.
PAD_AND_TIE = parse_fields(
    """
    pad_token_id                pad_token_id        None
    tie_word_embeddings         head.tie            True
    """
)

# The causal-LM output projection: its own tensor, or (tied) a repeat that archzoo skips.
LM_HEAD = "lm_head  LM_PROJ"

BERT_EMBEDDINGS = """
    embeddings.word_embeddings          WORD
    embeddings.position_embeddings      POSITION
    embeddings.token_type_embeddings    TOKEN_TYPE
    embeddings.LayerNorm                EMBED_NORM
"""
BERT_BUFFERS = ("embeddings.position_ids", "embeddings.token_type_ids")  # saved by old versions


def megatron_layer(layer: str) -> str:
    """Norms and MLP of a block in the Megatron-derived names (BLOOM, GPT-NeoX)."""
    return f"""
    {layer}.(input_layernorm,post_attention_layernorm)   ATTN_NORM,FFN_NORM
    {layer}.mlp.(dense_h_to_4h,dense_4h_to_h)            FC_IN,FC_OUT
    """


def mlm_head(at: str, dense: str, norm: str) -> str:
    """A masked-LM head under `at`: transform, decoder, and the bias forward adds (the
    decoder's own in untied transformers-5 checkpoints, the head bias otherwise)."""
    return f"""
    {at}{dense}                         MLM_DENSE
    {at}{norm}                          MLM_NORM
    {at}decoder                         MLM_DECODER
    {at}decoder.bias|{at}bias           MLM_BIAS        tensor
    """


def table(
    base: str,
    head: str = "",
    *,
    prefixes: tuple[str, ...] = ("",),
    stacks: Mapping[str, Mapping[str, str]] | None = None,
    ignore: tuple[str, ...] = (),
) -> TensorTable:
    """A tensor table from text: `base` rules sit under the base-model prefix, `head` not."""
    rules = parse_rules(base, PATHS) + parse_rules(head, PATHS, base=False)
    return TensorTable(rules, prefixes, stacks or {"decoder": {}}, ignore)
