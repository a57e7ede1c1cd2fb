"""Built-in components and HF converters, registered through the same hook a third-party plugin uses."""

from __future__ import annotations

from typing import Any

from archzoo.hooks import hookimpl

from .attention.bigbird import BigBirdAttention
from .attention.block_local import BlockLocalAttention
from .attention.block_sparse import BlockSparseAttention
from .attention.disentangled import DisentangledAttention
from .attention.fixed import FixedAttention
from .attention.local import LocalAttention
from .attention.longformer import LongformerAttention
from .attention.mha import MultiHeadAttention
from .attention.mla import MultiHeadLatentAttention
from .attention.strided import StridedAttention
from .attention.transient_global import TransientGlobalAttention
from .block.parallel import ParallelBlock
from .block.post_ln import PostLNBlock
from .block.pre_ln import PreLNBlock
from .block.res_post_ln import ResPostLNBlock
from .block.sandwich_ln import SandwichLNBlock
from .converters.albert import AlbertConverter
from .converters.bart import BartConverter
from .converters.bert import BertConverter, RobertaConverter, XLMRobertaConverter
from .converters.big_bird import BigBirdConverter
from .converters.bigbird_pegasus import BigBirdPegasusConverter
from .converters.bloom import BloomConverter
from .converters.ctrl import CTRLConverter
from .converters.deberta import DebertaConverter, DebertaV2Converter
from .converters.deepseek import DeepseekV3Converter
from .converters.distilbert import DistilBertConverter
from .converters.electra import ElectraConverter
from .converters.falcon import FalconConverter
from .converters.gemma import GemmaConverter
from .converters.gemma2 import Gemma2Converter
from .converters.gemma3 import Gemma3TextConverter
from .converters.gpt2 import GPT2Converter
from .converters.gpt_bigcode import GPTBigCodeConverter
from .converters.gpt_neo import GPTNeoConverter
from .converters.gpt_neox import GPTNeoXConverter
from .converters.gpt_oss import GptOssConverter
from .converters.gptj import GPTJConverter
from .converters.llama import LlamaConverter
from .converters.longformer import LongformerConverter
from .converters.longt5 import LongT5Converter
from .converters.m2m_100 import M2M100Converter
from .converters.marian import MarianConverter
from .converters.mbart import MBartConverter
from .converters.mistral import MistralConverter
from .converters.mixtral import MixtralConverter
from .converters.modernbert import ModernBertConverter
from .converters.mpt import MptConverter
from .converters.olmo2 import Olmo2Converter
from .converters.openai_gpt import OpenAIGPTConverter
from .converters.opt import OPTConverter
from .converters.pegasus import PegasusConverter
from .converters.phi3 import Phi3Converter
from .converters.qwen import Qwen2Converter, Qwen3Converter, Qwen3MoeConverter
from .converters.smollm3 import SmolLM3Converter
from .converters.stablelm import StableLmConverter
from .converters.starcoder2 import Starcoder2Converter
from .converters.t5 import T5Converter
from .converters.umt5 import UMT5Converter
from .converters.xlm import XLMConverter
from .embedding.factorized import FactorizedEmbedding
from .embedding.token import TokenEmbedding
from .ffn.glu import GLUFeedForward
from .ffn.mlp import MLPFeedForward
from .ffn.moe import MoEFeedForward
from .head.classifier import ClassifierHead
from .head.discriminator import DiscriminatorHead
from .head.lm import LMHead
from .head.mlm import MLMHead
from .head.multiple_choice import MultipleChoiceHead
from .head.none import NoHead
from .head.question_answering import QuestionAnsweringHead
from .head.sentence_embedding import SentenceEmbeddingHead
from .head.token_classifier import TokenClassifierHead
from .norm.layernorm import LayerNorm
from .norm.rmsnorm import RMSNorm
from .position.alibi import AlibiPosition
from .position.deberta_relative import DebertaRelativePosition
from .position.learned import LearnedPosition
from .position.none import NoPosition
from .position.relative import RelativePosition
from .position.rotary import RotaryPosition
from .position.sinusoidal import SinusoidalPosition
from .position.t5_relative import T5RelativePosition
from .position.t5_windowed import T5WindowedPosition
from .sharing.all import AllSharing
from .sharing.groups import GroupSharing
from .sharing.none import NoSharing

BUILTIN_COMPONENTS = (
    TokenEmbedding,
    FactorizedEmbedding,
    SinusoidalPosition,
    LearnedPosition,
    RotaryPosition,
    AlibiPosition,
    RelativePosition,
    T5RelativePosition,
    DebertaRelativePosition,
    T5WindowedPosition,
    NoPosition,
    MultiHeadAttention,
    LocalAttention,
    StridedAttention,
    FixedAttention,
    BlockSparseAttention,
    BigBirdAttention,
    LongformerAttention,
    BlockLocalAttention,
    TransientGlobalAttention,
    MultiHeadLatentAttention,
    DisentangledAttention,
    LayerNorm,
    RMSNorm,
    PostLNBlock,
    PreLNBlock,
    ResPostLNBlock,
    SandwichLNBlock,
    ParallelBlock,
    MLPFeedForward,
    GLUFeedForward,
    MoEFeedForward,
    NoSharing,
    AllSharing,
    GroupSharing,
    NoHead,
    LMHead,
    MLMHead,
    ClassifierHead,
    TokenClassifierHead,
    QuestionAnsweringHead,
    MultipleChoiceHead,
    DiscriminatorHead,
    SentenceEmbeddingHead,
)

BUILTIN_CONVERTERS = (
    BertConverter(),
    AlbertConverter(),
    RobertaConverter(),
    XLMRobertaConverter(),
    DistilBertConverter(),
    ElectraConverter(),
    BigBirdConverter(),
    LongformerConverter(),
    BigBirdPegasusConverter(),
    GPT2Converter(),
    T5Converter(),
    LongT5Converter(),
    BartConverter(),
    LlamaConverter(),
    BloomConverter(),
    GPTNeoXConverter(),
    GPTNeoConverter(),
    MistralConverter(),
    MixtralConverter(),
    GemmaConverter(),
    Gemma2Converter(),
    Gemma3TextConverter(),
    OpenAIGPTConverter(),
    SmolLM3Converter(),
    Qwen2Converter(),
    Qwen3Converter(),
    Qwen3MoeConverter(),
    Olmo2Converter(),
    FalconConverter(),
    StableLmConverter(),
    Phi3Converter(),
    MptConverter(),
    OPTConverter(),
    GPTBigCodeConverter(),
    MarianConverter(),
    PegasusConverter(),
    MBartConverter(),
    M2M100Converter(),
    GptOssConverter(),
    Starcoder2Converter(),
    UMT5Converter(),
    GPTJConverter(),
    DeepseekV3Converter(),
    CTRLConverter(),
    ModernBertConverter(),
    XLMConverter(),
    DebertaConverter(),
    DebertaV2Converter(),
)


@hookimpl
def archzoo_register(registrar: Any) -> None:
    """Register every built-in component."""
    for cls in BUILTIN_COMPONENTS:
        registrar.add_component(cls)
    for converter in BUILTIN_CONVERTERS:
        registrar.add_converter(converter)
