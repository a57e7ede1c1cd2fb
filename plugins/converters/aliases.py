"""HF types with a supported type's layout: one `Alias` entry each, read and written by the
converter table of the type named (each checked against transformers' modeling code)."""

from __future__ import annotations

from archzoo.parts.hf_alias import Alias

from .apertus import ApertusConverter
from .bart import BartConverter
from .bert import RobertaConverter
from .deepseek import DeepseekV3Converter
from .glm4_moe import Glm4MoeConverter
from .gpt2 import GPT2Converter
from .llama import LlamaConverter
from .mamba import MambaConverter
from .mbart import MBartConverter
from .mistral import MistralConverter
from .qwen import Qwen2Converter
from .t5 import T5Converter
from .xlm import XLMConverter

DECODER_ONLY = ("Model", "ForCausalLM")  # types transformers runs with Llama's classes
SEQ2SEQ_LM = ("Model", "ForConditionalGeneration", "ForCausalLM")  # no classification heads

ALIASES = (
    Alias("camembert", RobertaConverter, "Camembert", note="RoBERTa's classes"),
    Alias(
        "data2vec-text",
        RobertaConverter,
        "Data2VecText",
        prefix="data2vec_text.",
        note="RoBERTa's layout under its own base-model prefix",
    ),
    Alias("ministral", MistralConverter, "Ministral", note="Mistral's layout (no q/k/v biases)"),
    Alias(  # q/k/v biases, no output bias, as Qwen2; dropout on each sublayer's output
        "seed_oss",
        Qwen2Converter,
        "SeedOss",
        requires={"attention_bias": True, "attention_out_bias": False},
        fields="residual_dropout  dropout  0.1",
        fixed="embedding: {dropout: 0.0}",
        note="Qwen2's layout with a residual dropout",
    ),
    Alias(  # transformers 5 ties mT5's head whatever the config says, and never rescales it
        "mt5",
        T5Converter,
        "MT5",
        requires={"scale_decoder_outputs": False},
        defaults={"feed_forward_proj": "gated-gelu", "scale_decoder_outputs": False},
        note="T5 v1.1 with a tied head that is not rescaled",
    ),
    Alias(  # BART's modules; labels shift as mBART's (no decoder_start_token_id)
        "plbart",
        BartConverter,
        "PLBart",
        defaults={"scale_embedding": True},
        tasks=("Model", "ForConditionalGeneration", "ForSequenceClassification", "ForCausalLM"),
        note="BART with scaled embeddings",
    ),
    Alias(  # positions by index from row 0, no embedding norm
        "blenderbot",
        MBartConverter,
        "Blenderbot",
        defaults={"pad_token_id": 0},
        fixed="embedding: {norm: false}, position: {offset: 0}",
        tasks=SEQ2SEQ_LM,
        note="mBART's pre-LN layout without an embedding norm, positions from row 0",
    ),
    Alias(  # its decoder normalises the token vectors before the positions join
        "blenderbot-small",
        BartConverter,
        "BlenderbotSmall",
        defaults={"pad_token_id": 0},
        fixed="position: {offset: 0}, decoder: {embedding: {positions_after_norm: true, scale: false}}",
        tasks=SEQ2SEQ_LM,
        note="BART with positions from row 0 and the decoder's norm before its positions",
    ),
    Alias("mvp", BartConverter, "Mvp", requires={"use_prompt": False}, note="BART without prompts"),
    Alias(  # FlauBERT's pre_norm layers end without a final norm: refused; layerdrop: training
        "flaubert",
        XLMConverter,
        "Flaubert",
        requires={"pre_norm": False},
        note="XLM's post-LN layout",
    ),
    Alias(  # its o_proj never has a bias: q/k/v biases refused rather than half-imported
        "helium",
        LlamaConverter,
        "Helium",
        requires={"attention_bias": False},
        fixed="position: {interleaved: true}",
        tasks=("Model", "ForCausalLM", "ForSequenceClassification", "ForTokenClassification"),
        note="Llama's layout with rotary on adjacent pairs",
    ),
    Alias(  # one use_bias for every linear; transformers 5 omits its default tied head
        "ernie4_5",
        LlamaConverter,
        "Ernie4_5",
        fields="use_bias  attention.bias,attention.out_bias,ffn.bias  False",
        defaults={"tie_word_embeddings": True},
        fixed="position: {interleaved: true}",
        tasks=DECODER_ONLY,
        note="Llama's layout with rotary on adjacent pairs and one bias switch",
    ),
    Alias(  # its LM head may be pruned to a text prefix of the vocabulary: refused then
        "apertus1p5_text",
        ApertusConverter,
        "Apertus1p5Text",
        requires={"output_vocab_size": None},
        tasks=DECODER_ONLY,
        note="Apertus's layout (the text model of Apertus 1.5) with a full-width LM head",
    ),
    Alias(
        "internlm3",
        LlamaConverter,
        "InternLM3",
        renamed={"qkv_bias": "attention_bias", "bias": "mlp_bias"},
        tasks=DECODER_ONLY,
        note="runs as LlamaForCausalLM",
    ),
    Alias(  # transformers builds it from GPT2Config with GPT-2's classes (its own tokenizer)
        "gpt-sw3",
        GPT2Converter,
        "GPT2",
        tasks=("Model", "LMHeadModel", "ForSequenceClassification", "ForTokenClassification"),
        note="GPT-2's config and classes under its own name",
    ),
    Alias(
        "iquestcoder",
        LlamaConverter,
        "IQuestCoder",
        tasks=DECODER_ONLY,
        note="runs as LlamaForCausalLM",
    ),
    Alias(  # weightless norms (non-persistent buffers): no tensors to read or write
        "falcon_mamba",
        MambaConverter,
        "FalconMamba",
        fields="mixer_rms_eps  attention.norm_eps  1e-6",
        fixed="attention: {inner_norms: true, inner_norm_weights: false}",
        note="Mamba's layout with plain RMS norms on dt, B and C",
    ),
    Alias(  # transformers runs it with DeepSeek-V3's classes; its config reads Sarvam's keys
        "sarvam_mla",
        DeepseekV3Converter,
        "DeepseekV3",
        defaults={"n_routed_experts": 128, "first_k_dense_replace": 1},
        renamed={"num_experts": "n_routed_experts", "num_shared_experts": "n_shared_experts"},
        tasks=DECODER_ONLY,
        note="runs as DeepseekV3ForCausalLM",
    ),
    Alias(  # Llama's attention (no QK norm) before GLM-4.5's experts on every layer
        "solar_open",
        Glm4MoeConverter,
        "SolarOpen",
        requires={"first_k_dense_replace": 0, "use_qk_norm": False},
        defaults={
            "first_k_dense_replace": 0,
            "partial_rotary_factor": 1.0,
            "rope_theta": 1e6,
            "moe_intermediate_size": 1280,
            "intermediate_size": 10944,  # no dense layer reads it
        },
        tasks=DECODER_ONLY,
        note="GLM-4.5's experts on every layer, no QK norm, rotary on the whole head",
    ),
)
