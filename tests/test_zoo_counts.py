"""Zoo parameter counts equal those of the matching Hugging Face class, both built on meta.

Every zoo spec is either in `HF_COUNTERPARTS` (built by transformers with the published
configuration and compared parameter for parameter) or named in `NO_HF_COUNTERPART` with a
reason, so a new spec without a count check fails `test_every_zoo_spec_has_a_count_check`.
No expected count is typed here: both sides are counted from the models themselves.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch
from published_configs import CAUSAL_LM, PUBLISHED

import archzoo

transformers = pytest.importorskip("transformers")


@dataclass(frozen=True)
class Counterpart:
    """A transformers class, its configuration, and parameters the zoo does not model."""

    make: Callable[[], tuple[type, object]]
    exclude: tuple[str, ...] = ()  # substrings of HF parameter names left out of the count
    why: str = ""
    unread: bool = False  # the exclusions are trainable, but no output of the class reads them
    fixed: bool = False  # the exclusions are trainable there, but hold a computed table


def _marian(d_model: int, n_heads: int, d_ff: int) -> Callable[[], tuple[type, object]]:
    """Marian is the HF class with Vaswani et al.'s layout: post-LN, no embedding or final
    norm, sqrt(d)-scaled shared embeddings tied to the output, ReLU, sinusoidal positions."""

    def make() -> tuple[type, object]:
        cfg = transformers.MarianConfig(
            vocab_size=37000,
            decoder_vocab_size=37000,
            d_model=d_model,
            encoder_layers=6,
            decoder_layers=6,
            encoder_attention_heads=n_heads,
            decoder_attention_heads=n_heads,
            encoder_ffn_dim=d_ff,
            decoder_ffn_dim=d_ff,
            activation_function="relu",
            scale_embedding=True,
            share_encoder_decoder_embeddings=True,
            tie_word_embeddings=True,
            max_position_embeddings=1024,
            pad_token_id=0,
            decoder_start_token_id=0,
            eos_token_id=1,
        )
        return transformers.MarianMTModel, cfg

    return make


# Marian stores its sinusoidal tables as frozen nn.Embedding weights (requires_grad=False,
# values computed, never trained); the zoo's `sinusoidal` position computes them on the fly.
# `final_logits_bias` is a buffer, not a parameter, so it is not counted on either side.
MARIAN_EXCLUDE = ("embed_positions",)
MARIAN_WHY = "frozen sinusoidal position tables (fixed values, not trained)"


def _gpt2(**kw: int) -> Callable[[], tuple[type, object]]:
    return lambda: (transformers.GPT2LMHeadModel, transformers.GPT2Config(**kw))


def _bert(**kw: int) -> Callable[[], tuple[type, object]]:
    return lambda: (transformers.BertForMaskedLM, transformers.BertConfig(**kw))


def _gpt1() -> tuple[type, object]:
    cfg = transformers.OpenAIGPTConfig(
        vocab_size=40478, n_positions=512, n_embd=768, n_layer=12, n_head=12, afn="gelu"
    )
    return transformers.OpenAIGPTLMHeadModel, cfg


def _t5(**kw: int) -> Callable[[], tuple[type, object]]:
    return lambda: (transformers.T5ForConditionalGeneration, transformers.T5Config(**kw))


def _albert(**kw: int) -> Callable[[], tuple[type, object]]:
    return lambda: (transformers.AlbertForMaskedLM, transformers.AlbertConfig(**kw))


# Llama 3.2 1B's published configuration (also the oracle of the zoo spec's rope scaling)
LLAMA32_1B = dict(
    vocab_size=128256,
    hidden_size=2048,
    intermediate_size=8192,
    num_hidden_layers=16,
    num_attention_heads=32,
    num_key_value_heads=8,
    head_dim=64,
    max_position_embeddings=131072,
    rms_norm_eps=1e-5,
    tie_word_embeddings=True,
    bos_token_id=128000,
    eos_token_id=128001,
    rope_parameters={
        "rope_type": "llama3",
        "rope_theta": 500000.0,
        "factor": 32.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    },
)


HF_COUNTERPARTS: dict[str, Counterpart] = {
    "mistral-7b": Counterpart(
        lambda: (transformers.MistralForCausalLM, transformers.MistralConfig())
    ),
    "gpt-neo-125m": Counterpart(
        lambda: (
            transformers.GPTNeoForCausalLM,
            transformers.GPTNeoConfig(
                hidden_size=768,
                num_layers=12,
                num_heads=12,
                attention_types=[[["global", "local"], 6]],
                max_position_embeddings=2048,
                window_size=256,
            ),
        )
    ),
    "longformer-base": Counterpart(
        lambda: (
            transformers.LongformerForMaskedLM,
            transformers.LongformerConfig(
                vocab_size=50265,
                max_position_embeddings=4098,
                type_vocab_size=1,
                attention_window=512,
                pad_token_id=1,
            ),
        )
    ),
    "albert-base": Counterpart(
        _albert(
            hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072
        )
    ),
    "albert-large": Counterpart(
        _albert(
            hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096
        )
    ),
    "albert-xlarge": Counterpart(
        _albert(
            hidden_size=2048, num_hidden_layers=24, num_attention_heads=16, intermediate_size=8192
        )
    ),
    "albert-xxlarge": Counterpart(
        _albert(
            hidden_size=4096, num_hidden_layers=12, num_attention_heads=64, intermediate_size=16384
        )
    ),
    "transformer-base": Counterpart(_marian(512, 8, 2048), MARIAN_EXCLUDE, MARIAN_WHY),
    "transformer-big": Counterpart(_marian(1024, 16, 4096), MARIAN_EXCLUDE, MARIAN_WHY),
    "gpt": Counterpart(_gpt1),
    "gpt2": Counterpart(_gpt2()),
    "gpt2-medium": Counterpart(_gpt2(n_embd=1024, n_layer=24, n_head=16)),
    "gpt2-large": Counterpart(_gpt2(n_embd=1280, n_layer=36, n_head=20)),
    "gpt2-xl": Counterpart(_gpt2(n_embd=1600, n_layer=48, n_head=25)),
    "bert-base": Counterpart(_bert()),
    "bert-large": Counterpart(
        _bert(
            hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096
        )
    ),
    "roberta-base": Counterpart(
        lambda: (
            transformers.RobertaForMaskedLM,
            transformers.RobertaConfig(
                vocab_size=50265, max_position_embeddings=514, type_vocab_size=1, pad_token_id=1
            ),
        )
    ),
    "bart-base": Counterpart(
        lambda: (
            transformers.BartForConditionalGeneration,
            transformers.BartConfig(
                vocab_size=50265,
                d_model=768,
                encoder_layers=6,
                decoder_layers=6,
                encoder_attention_heads=12,
                decoder_attention_heads=12,
                encoder_ffn_dim=3072,
                decoder_ffn_dim=3072,
                max_position_embeddings=1024,
            ),
        )
    ),
    "t5-small": Counterpart(
        _t5(vocab_size=32128, d_model=512, d_kv=64, d_ff=2048, num_layers=6, num_heads=8)
    ),
    "t5-base": Counterpart(
        _t5(vocab_size=32128, d_model=768, d_kv=64, d_ff=3072, num_layers=12, num_heads=12)
    ),
    "llama2-7b": Counterpart(
        lambda: (
            transformers.LlamaForCausalLM,
            transformers.LlamaConfig(
                vocab_size=32000,
                hidden_size=4096,
                intermediate_size=11008,
                num_hidden_layers=32,
                num_attention_heads=32,
                num_key_value_heads=32,
                tie_word_embeddings=False,
            ),
        )
    ),
    "llama3.2-1b": Counterpart(
        lambda: (
            transformers.LlamaForCausalLM,
            transformers.LlamaConfig(**LLAMA32_1B),
        )
    ),
    "bloom-560m": Counterpart(
        lambda: (
            transformers.BloomForCausalLM,
            transformers.BloomConfig(vocab_size=250880, hidden_size=1024, n_layer=24, n_head=16),
        )
    ),
    "pythia-160m": Counterpart(
        lambda: (
            transformers.GPTNeoXForCausalLM,
            transformers.GPTNeoXConfig(
                vocab_size=50304,
                hidden_size=768,
                num_hidden_layers=12,
                num_attention_heads=12,
                intermediate_size=3072,
                rotary_pct=0.25,
                max_position_embeddings=2048,
                use_parallel_residual=True,
                tie_word_embeddings=False,
            ),
        )
    ),
}

HF_COUNTERPARTS["distilbert-base"] = Counterpart(
    lambda: (transformers.DistilBertForMaskedLM, transformers.DistilBertConfig())
)
HF_COUNTERPARTS["xlm-roberta-base"] = Counterpart(
    lambda: (
        transformers.XLMRobertaForMaskedLM,
        transformers.XLMRobertaConfig(
            vocab_size=250002, max_position_embeddings=514, type_vocab_size=1, pad_token_id=1
        ),
    )
)
HF_COUNTERPARTS["electra-base-discriminator"] = Counterpart(
    lambda: (
        transformers.ElectraForPreTraining,
        transformers.ElectraConfig(
            embedding_size=768, hidden_size=768, num_attention_heads=12, intermediate_size=3072
        ),
    )
)

# HF parameters left out of the count by config class: frozen ones archzoo keeps as buffers,
# or (UNREAD) trainable ones no output of the class reads
FROZEN = {
    "EsmConfig": (
        ("contact_head",),
        "ESM's contact-prediction head (a regression over every layer's attention maps) that "
        "every transformers ESM class holds and no archzoo head reads: not imported, exported "
        "as zeros",
    ),
    "FSMTConfig": (
        ("embed_positions",),
        "FSMT's sinusoidal tables: nn.Embedding weights, trainable in transformers but holding "
        "fairseq's computed table (import checks it); the zoo's `sinusoidal` computes them",
    ),
    "Ernie4_5_MoeConfig": (
        ("moe_statics",),
        "the experts' choice bias: a parameter without gradient there, a buffer here",
    ),
}

FROZEN["TrOCRConfig"] = (
    ("encoder_attn",),
    "TrOCR's cross-attention to an image encoder, which TrOCRForCausalLM builds and no input "
    "of the causal LM reaches: not imported, exported as zeros",
)
UNREAD = {"EsmConfig", "TrOCRConfig"}  # trainable exclusions no logit reads (exported as zeros)
FIXED = {"FSMTConfig"}  # trainable exclusions whose values are a computed table, never trained

# zoo specs typed from their published configs (tests/published_configs.py)
for _name, (_config, _kwargs) in PUBLISHED.items():
    _frozen = _config in ("MarianConfig", "PegasusConfig", "RoFormerConfig")  # saved sinusoids
    _exclude, _why = FROZEN.get(_config, (MARIAN_EXCLUDE, MARIAN_WHY) if _frozen else ((), ""))
    HF_COUNTERPARTS[_name] = Counterpart(
        lambda c=_config, k=_kwargs: (
            getattr(transformers, CAUSAL_LM[c]),
            getattr(transformers, c)(**k),
        ),
        _exclude,
        _why,
        _config in UNREAD,
        _config in FIXED,
    )

# Zoo specs with no transformers class of the same architecture, each with the reason.
NO_HF_COUNTERPART: dict[str, str] = {
    "sparse-transformer": "OpenAI's Sparse Transformer has no transformers class",
    "bigbird-base": "BigBirdForMaskedLM carries an unused trainable pooler; "
    "tests/test_sparse_hf.py checks the count without it",
}


def hf_count(counterpart: Counterpart) -> int:
    """Parameters of the HF model on meta (tied weights once), minus the documented exclusions."""
    cls, cfg = counterpart.make()
    with torch.device("meta"):
        model = cls(cfg)
    total = 0
    for name, p in model.named_parameters():  # deduplicates tied parameters
        if any(part in name for part in counterpart.exclude):
            assert counterpart.unread or counterpart.fixed or not p.requires_grad, (
                f"excluded {name} is trainable; only frozen, unread or fixed-table ones may go"
            )
            continue
        total += p.numel()
    return total


@pytest.mark.parametrize("name", sorted(HF_COUNTERPARTS))
def test_parameter_count_equals_hf(name: str) -> None:
    counterpart = HF_COUNTERPARTS[name]
    zoo = archzoo.build_model(name, device="meta").num_parameters()
    hf = hf_count(counterpart)
    cls_name = counterpart.make()[0].__name__
    assert zoo == hf, f"{name}: archzoo {zoo:,} != {cls_name} {hf:,} (difference {zoo - hf:+,})"


def test_exclusions_are_real() -> None:
    """Each exclusion removes something, so a renamed HF parameter cannot hide a difference."""
    for name, counterpart in HF_COUNTERPARTS.items():
        if not counterpart.exclude:
            continue
        cls, cfg = counterpart.make()
        with torch.device("meta"):
            names = [n for n, _ in cls(cfg).named_parameters()]
        for part in counterpart.exclude:
            assert any(part in n for n in names), f"{name}: exclusion {part!r} matches nothing"


def test_every_zoo_spec_has_a_count_check() -> None:
    models = set(archzoo.list_models())
    both = set(HF_COUNTERPARTS) & set(NO_HF_COUNTERPART)
    assert not both, f"listed both with and without an HF counterpart: {sorted(both)}"
    missing = models - set(HF_COUNTERPARTS) - set(NO_HF_COUNTERPART)
    assert not missing, (
        f"zoo specs without a parameter-count check: {sorted(missing)}; add each to "
        "HF_COUNTERPARTS in tests/test_zoo_counts.py, or to NO_HF_COUNTERPART with a reason"
    )
    stale = (set(HF_COUNTERPARTS) | set(NO_HF_COUNTERPART)) - models
    assert not stale, f"count table names specs that are not in the zoo: {sorted(stale)}"
