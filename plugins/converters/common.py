"""Table parts shared by the Hugging Face converters."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

from archzoo.parts.converter import (
    ConversionError,
    Field,
    Task,
    Values,
    parse_fields,
    spec_parts,
)
from archzoo.parts.hf_tensors import TensorTable, parse_rules

from . import paths
from .rope import rope_parameters as rope_parameters  # re-exported: its old home

PATHS = {k: v for k, v in vars(paths).items() if k.isupper()}

ACTIVATION = Values(
    {
        "gelu": "gelu",
        "gelu_new": "gelu_new",  # op by op, as transformers: bit-identical in bf16
        "gelu_pytorch_tanh": "gelu_tanh",  # F.gelu(approximate="tanh"): exported as this
        "gelu_fast": "gelu_tanh",  # its own op order; F.gelu's numbers in fp32
        "relu": "relu",
        "relu2": "relu_squared",
        "quick_gelu": "quick_gelu",
        "silu": "silu",
        "swish": "silu",
    }
)


def with_defaults(fields: Iterable[Field], **defaults: Any) -> tuple[Field, ...]:
    """A related type's fields with other defaults for the HF keys named."""
    return tuple(replace(f, default=defaults[f.hf]) if f.hf in defaults else f for f in fields)


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
PAD = parse_fields("pad_token_id  pad_token_id  None")
# A converter without `tasks` (LM only) may still list these; tasks carry them otherwise.
LM_HEAD = "lm_head  LM_PROJ"


def tie(default: bool) -> Field:
    """Whether the LM head reuses the token table (HF's default differs per type)."""
    return Field("tie_word_embeddings", "head.tie", default)


PAD_AND_TIE = (*PAD, tie(True))  # for converters without tasks


def task(head: str, rules: str = "", *, base: str = "", **options: Any) -> Task:
    """A task from text: the head as YAML flow-mapping items, its tensor rules (those in
    `base` sit under the base-model prefix, like BERT's pooler)."""
    parsed = parse_rules(base, PATHS) + parse_rules(rules, PATHS, base=False)
    return Task(spec_parts(head), parsed, **options)


HEADLESS = task("kind: none")
# Why a type's architecture is refused (Converter.refused), where several types share it
AS_DECODER = (
    "the encoder run as a causal decoder (is_decoder, cross-attention): archzoo imports "
    "this type as a bidirectional encoder"
)
TWO_HEADS = "an LM head and a multiple-choice head at once: an archzoo model has one head"
QUESTION_ANSWERING = task("kind: question_answering", "qa_outputs  QA")


def token_classifier(module: str = "classifier") -> Task:
    """A label per token from `module` (`...ForTokenClassification`)."""
    return task("kind: token_classifier", f"{module}  CLASSIFIER", labels=True)


TASK_LM = "lm_head  LM_PROJ\n"


def eos_classifier(eos_default: int) -> Task:
    """BART's and T5's ...ForSequenceClassification: the decoder state at the last <eos> of
    input_ids, dense + tanh + out_proj (classification_head)."""
    return task(
        "kind: classifier, pooling: eos, pooler: true",
        "classification_head.(dense,out_proj)  HEAD_POOLER,CLASSIFIER",
        labels=True,
        fields=(
            Field("eos_token_id", "head.eos_token_id", eos_default),
            Field("classifier_dropout", "head.dropout", 0.0),
        ),
    )


# An encoder-decoder's decoder alone as a causal LM (BartForCausalLM and kin): transformers
# builds (and saves) its cross-attention, which no input reaches; positions by index always
DECODER_LM = task(
    "kind: lm, shift: false",  # transformers scores labels as given, unshifted
    TASK_LM,
    fields=(tie(True),),
    family="decoder",
    ignore=("layers.{i}.encoder_attn.{m}.{p}", "layers.{i}.encoder_attn_layer_norm.{p}"),
    fixed={"position.count": "absolute"},
)


def lm_task(default_tie: bool, rules: str = TASK_LM) -> Task:
    """A causal-LM head: its own projection, or (tied) a repeat that archzoo skips."""
    return task("kind: lm", rules, fields=(tie(default_tie),))


def decoder_tasks(lm_key: str, lm: Task, token: str = "classifier") -> dict[str, Task]:
    """A decoder type's architectures: base, causal LM, and the task heads on the last token
    (`score`, no bias), every token, or spans."""
    return {
        "Model": HEADLESS,
        lm_key: lm,
        "ForSequenceClassification": task(
            "kind: classifier, pooling: last, pooler: false, bias: false",
            "score  CLASSIFIER",
            labels=True,
        ),
        "ForTokenClassification": token_classifier(token),
        "ForQuestionAnswering": QUESTION_ANSWERING,
    }


# the tasks of the decoder types whose LM head is tied by default (BLOOM, Falcon, GPT-Neo, ...)
TIED_CAUSAL_LM = decoder_tasks("ForCausalLM", lm_task(True))


def encoder_tasks(pooler: str, mlm: Task, sequence: Task | None = None) -> dict[str, Task]:
    """A BERT-like type's architectures; `pooler` is its pooler module (under the prefix)."""
    pool = f"{pooler}  HEAD_POOLER"
    return {
        "Model": task("kind: none", base=pool, pooler=f"{pooler}.weight"),
        "ForMaskedLM": mlm,
        "ForPreTraining": mlm,
        "ForSequenceClassification": sequence
        or task(
            "kind: classifier, pooling: cls, pooler: true",
            "classifier  CLASSIFIER",
            base=pool,
            labels=True,
        ),
        "ForTokenClassification": token_classifier(),
        "ForQuestionAnswering": QUESTION_ANSWERING,
        "ForMultipleChoice": task(
            "kind: multiple_choice, pooling: cls, pooler: true", "classifier  CLASSIFIER", base=pool
        ),
    }


BERT_EMBEDDINGS = """
    embeddings.word_embeddings          WORD
    embeddings.position_embeddings      POSITION
    embeddings.token_type_embeddings    TOKEN_TYPE
    embeddings.LayerNorm                EMBED_NORM
"""
BERT_BUFFERS = ("embeddings.position_ids", "embeddings.token_type_ids")  # saved by old versions


# GPT-2's token and position tables and norms (GPT-Neo keeps them)
GPT2_TABLES_AND_NORMS = """
    wte                 WORD
    wpe                 POSITION
    h.{i}.(ln_1,ln_2)   ATTN_NORM,FFN_NORM
    ln_f                FINAL_NORM
"""


def megatron_layer(layer: str, attention: str) -> str:
    """A block in the Megatron-derived names (BLOOM, GPT-NeoX): q|k|v fused per head."""
    return f"""
    {layer}.{attention}.query_key_value                  QKV     heads_interleaved
    {layer}.{attention}.dense                            ATTN_OUT
    {layer}.(input_layernorm,post_attention_layernorm)   ATTN_NORM,FFN_NORM
    {layer}.mlp.(dense_h_to_4h,dense_4h_to_h)            FC_IN,FC_OUT
    """


def layer_types(
    config: Mapping[str, Any],
    n: int,
    known: tuple[str, ...],
    fallback: Callable[[Mapping[str, Any], int], Iterable[Any]] | None = None,
) -> list[str]:
    """A hybrid's kind of each of its `n` layers: config.json's `layer_types`, else
    `fallback(config, n)` (a family's older keys or transformers' default); one of `known`
    per layer, else a ConversionError naming the list."""
    kinds = config.get("layer_types")
    if kinds is None and fallback is not None:
        kinds = fallback(config, n)
    kinds = list(kinds or ())
    if len(kinds) != n or set(kinds) - set(known):
        raise ConversionError(
            f"config.json layer_types={kinds!r}: expected one of {known} per layer ({n} layers)"
        )
    return kinds


def integer_expand(width: int, d: int, owner: str, key: str = "expand") -> int:
    """config.json's `key` of a Mamba mixer `width` wide in a d-wide model: width / d, which
    `owner` (the config class) holds as an integer; a ConversionError where it is not one."""
    if width % d:
        raise ConversionError(
            f"attention.d_inner {width} is not a whole multiple of d_model {d}: "
            f"{owner} has only an integer {key}"
        )
    return width // d


def layer_overrides(
    spec: dict[str, Any],
    attention: Mapping[str, Any],
    attends: Iterable[int],
    ffn: Mapping[str, Any],
    ffn_layers: Iterable[int],
) -> None:
    """A hybrid's `layers:` entries: `attention` on the layers in `attends`, `ffn` on those
    in `ffn_layers`, the spec's own mixer and FFN elsewhere; one entry per combination."""
    attends, ffn_layers = set(attends), set(ffn_layers)
    layers = []
    for a, f in ((True, False), (False, True), (True, True)):  # (False, False): the base
        chosen = [
            i for i in range(spec["n_layers"]) if (i in attends) == a and (i in ffn_layers) == f
        ]
        parts: dict[str, Any] = {"attention": attention} if a else {}
        if f:
            parts["ffn"] = ffn
        if chosen:
            layers.append({"select": chosen, **parts})
    if layers:
        spec["layers"] = layers


def mlm_task(at: str, dense: str, norm: str, activation: Field) -> Task:
    """A masked-LM head under `at`: transform, decoder, and the bias forward adds (the
    decoder's own in untied transformers-5 checkpoints, the head bias otherwise)."""
    rules = f"""
    {at}{dense}                         MLM_DENSE
    {at}{norm}                          MLM_NORM
    {at}decoder                         MLM_DECODER
    {at}decoder.bias|{at}bias           MLM_BIAS        tensor
    """
    return task("kind: mlm", rules, fields=(activation, tie(True)))


def table(
    base: str,
    head: str = "",
    *,
    prefixes: tuple[str, ...] = ("",),
    stacks: Mapping[str, Mapping[str, str]] | None = None,
    ignore: tuple[str, ...] = (),
) -> TensorTable:
    """A tensor table of the base model from text; tasks add their heads' rules (`head`:
    head rules for a converter without tasks; in one with tasks, a head's rules only apply
    where the model has the head)."""
    rules = parse_rules(base, PATHS) + parse_rules(head, PATHS, base=False)
    return TensorTable(rules, prefixes, stacks or {"decoder": {}}, ignore)
