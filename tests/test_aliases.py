"""HF types that share a supported type's layout (plugins/converters/aliases.py), and the
long tail's types whose converter is a small subclass of a supported table (Arcee, Nemotron,
OLMo, GLM, Phi, ...), each from a tiny perturbed transformers model with a padded row: its LM, headless and task-head classes
give transformers' outputs within 1e-4, decoders and encoder-decoders generate transformers'
greedy tokens, and an import exports as its own model_type. (The export round trip
of every registered type, aliases included, is tests/test_export.py's sweep; their zoo specs'
counts are tests/test_zoo_counts.py's, from tests/published_configs.py.)"""

from __future__ import annotations

import json

import pytest
import torch
import transformers as hf
from hf_util import assert_greedy_equal, max_diff_unpadded, padded_batch, perturb, save_hf

import archzoo
from archzoo.hf.probe import model_class
from archzoo.parts.converter import ConversionError
from archzoo.parts.hf_alias import Alias
from archzoo.parts.registry import RegistryError, get_registry

V = 96
ENCODER = dict(
    vocab_size=V,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=64,
    max_position_embeddings=66,
    type_vocab_size=1,
    pad_token_id=1,
)

DECODER = dict(
    vocab_size=V,
    hidden_size=32,
    intermediate_size=48,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=8,
    max_position_embeddings=64,
    pad_token_id=0,
)
BART = dict(
    vocab_size=V,
    d_model=32,
    encoder_layers=2,
    decoder_layers=2,
    encoder_attention_heads=4,
    decoder_attention_heads=4,
    encoder_ffn_dim=64,
    decoder_ffn_dim=64,
    max_position_embeddings=64,
    decoder_start_token_id=2,
)
T5 = dict(vocab_size=V, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4)
XLM = dict(vocab_size=V, emb_dim=32, n_layers=2, n_heads=4, max_position_embeddings=64)
# Granite 3.0's published multipliers (logits divided by 8)
GRANITE_MULTIPLIERS = dict(
    embedding_multiplier=12.0,
    residual_multiplier=0.22,
    attention_multiplier=0.015625,
    logits_scaling=8.0,
)
QWEN2_MOE = dict(
    num_experts=4,
    num_experts_per_tok=2,
    moe_intermediate_size=16,
    shared_expert_intermediate_size=24,
)
SMALL_MLA = dict(  # latent attention and sigmoid-routed experts at tiny sizes
    num_key_value_heads=4,
    n_routed_experts=4,
    num_experts_per_tok=2,
    moe_intermediate_size=16,
    q_lora_rank=24,
    kv_lora_rank=16,
    qk_nope_head_dim=8,
    qk_rope_head_dim=8,
    v_head_dim=8,
    n_group=2,
    topk_group=1,
)
GLM4_MOE = dict(  # sigmoid-routed experts with a correction bias and a shared expert
    n_routed_experts=4,
    num_experts_per_tok=2,
    moe_intermediate_size=16,
    n_shared_experts=1,
)
ENCODER_TASKS = ("ForMaskedLM", "Model", "ForSequenceClassification")
DECODER_TASKS = ("ForCausalLM", "Model", "ForSequenceClassification")

# model_type -> (tiny config keywords, its task classes tested: the LM first)
CASES: dict[str, tuple[dict, tuple[str, ...]]] = {
    "camembert": (ENCODER, ENCODER_TASKS),
    "data2vec-text": (ENCODER, (*ENCODER_TASKS, "ForTokenClassification")),
    "ministral": ({**DECODER, "sliding_window": 5}, DECODER_TASKS),  # shorter than the rows
    "seed_oss": ({**DECODER, "attention_bias": True}, DECODER_TASKS),
    "mt5": ({**T5, "tie_word_embeddings": False}, ("ForConditionalGeneration", "Model")),
    "plbart": (BART, ("ForConditionalGeneration", "Model", "ForCausalLM")),
    "mvp": (BART, ("ForConditionalGeneration", "Model", "ForQuestionAnswering")),
    "flaubert": (XLM, ("WithLMHeadModel", "Model", "ForTokenClassification")),
    "helium": (DECODER, (*DECODER_TASKS, "ForTokenClassification")),
    "ernie4_5": ({**DECODER, "use_bias": True}, ("ForCausalLM", "Model")),
    "internlm3": ({**DECODER, "qkv_bias": True, "bias": True}, ("ForCausalLM", "Model")),
    "apertus1p5_text": (DECODER, ("ForCausalLM", "Model")),
    "iquestcoder": (DECODER, ("ForCausalLM", "Model")),  # Llama's classes
    "gpt-sw3": (  # GPT2Config and GPT-2's classes, saved as model_type gpt-sw3
        dict(vocab_size=V, n_embd=32, n_layer=2, n_head=4, n_positions=64, pad_token_id=0),
        ("LMHeadModel", "Model", "ForSequenceClassification", "ForTokenClassification"),
    ),
    # converters (one small file each) over Llama's table
    "arcee": ({**DECODER, "mlp_bias": True}, (*DECODER_TASKS, "ForQuestionAnswering")),
    "nemotron": ({**DECODER, "attention_bias": True}, (*DECODER_TASKS, "ForTokenClassification")),
    "olmo": (DECODER, DECODER_TASKS),
    "jais2": (DECODER, ("ForCausalLM", "Model")),
    "glm": (DECODER, (*DECODER_TASKS, "ForTokenClassification")),
    "glm4": (DECODER, DECODER_TASKS),
    "phi": ({**DECODER, "qk_layernorm": True}, (*DECODER_TASKS, "ForTokenClassification")),
    "granite": ({**DECODER, **GRANITE_MULTIPLIERS}, ("ForCausalLM", "Model")),
    "qwen2_moe": (  # a dense layer after a routed one; a shared expert of its own width
        {**DECODER, **QWEN2_MOE, "mlp_only_layers": [1]},
        (*DECODER_TASKS, "ForTokenClassification", "ForQuestionAnswering"),
    ),
    "glm4_moe_lite": (
        {**DECODER, **SMALL_MLA, "mlp_layer_types": ["sparse", "dense"]},
        ("ForCausalLM", "Model"),
    ),
    "granitemoe": (
        {**DECODER, **GRANITE_MULTIPLIERS, "num_local_experts": 4, "num_experts_per_tok": 2},
        ("ForCausalLM", "Model"),
    ),
    "granitemoeshared": (
        {**DECODER, **GRANITE_MULTIPLIERS, "num_local_experts": 4, "num_experts_per_tok": 2}
        | {"shared_intermediate_size": 24},
        ("ForCausalLM", "Model"),
    ),
    "vaultgemma": (  # sliding layers with a window shorter than the rows
        {**DECODER, "sliding_window": 4, "query_pre_attn_scalar": 12},
        ("ForCausalLM", "Model"),
    ),
    "hyperclovax": (  # norms after the sublayers too; logits multiplied by logits_scaling
        {**DECODER, **GRANITE_MULTIPLIERS, "logits_scaling": 0.25},
        ("ForCausalLM", "Model"),
    ),
    "olmoe": ({**DECODER, "num_experts": 4, "num_experts_per_tok": 2}, ("ForCausalLM", "Model")),
    "exaone_moe": (  # a dense layer, then sliding (window shorter than the rows) and NoPE
        {  # global layers over sigmoid-routed experts with a shared one
            **DECODER,
            "num_hidden_layers": 3,
            "num_experts": 4,
            "num_experts_per_tok": 2,
            "moe_intermediate_size": 16,
            "sliding_window": 4,
            "sliding_window_pattern": 2,
        },
        ("ForCausalLM", "Model"),
    ),
    "cwm": (  # a global layer, then a sliding one whose window is shorter than the rows
        {**DECODER, "sliding_window": 4},
        ("ForCausalLM", "Model"),
    ),
    "flex_olmo": (  # OLMo 2's norms after the sublayers; renormalised top-k weights
        {**DECODER, "num_experts": 4, "num_experts_per_tok": 2, "norm_topk_prob": True},
        ("ForCausalLM", "Model"),
    ),
    "exaone": (DECODER, ("ForCausalLM", "Model")),  # saved under EXAONE's own names
    "jina_embeddings_v3": (
        ENCODER,
        (*ENCODER_TASKS, "ForTokenClassification", "ForQuestionAnswering"),
    ),
    "nomic_bert": ({**ENCODER, "type_vocab_size": 2}, (*ENCODER_TASKS, "ForTokenClassification")),
    "xlm-roberta-xl": (ENCODER, (*ENCODER_TASKS, "ForQuestionAnswering")),
    "roberta-prelayernorm": (ENCODER, (*ENCODER_TASKS, "ForTokenClassification")),
    "megatron-bert": (
        {**ENCODER, "type_vocab_size": 2},
        (*ENCODER_TASKS, "ForTokenClassification"),
    ),
    "cohere": ({**DECODER, "use_qk_norm": True, "logit_scale": 0.3}, ("ForCausalLM", "Model")),
    "sarvam_mla": (  # a dense layer before a routed one, queries without a low-rank path
        {**DECODER, **SMALL_MLA, "q_lora_rank": None, "first_k_dense_replace": 1},
        ("ForCausalLM", "Model"),
    ),
    "sarvam_moe": (  # a dense layer before a routed one, QK norms, rotary on the whole head
        {**DECODER, **GLM4_MOE, "first_k_dense_replace": 1, "attention_bias": True},
        ("ForCausalLM", "Model"),
    ),
    "youtu": (  # latent attention with a low-rank query, dense SwiGLU layers, a tied head
        {**DECODER, **SMALL_MLA, "tie_word_embeddings": True},
        ("ForCausalLM", "Model"),
    ),
    "mellum": (  # a sliding layer (window shorter than the rows) with its own rotary base
        # after a full one; a dense layer before a routed one
        {**DECODER, "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 16}
        | {"sliding_window": 4, "layer_types": ["full_attention", "sliding_attention"]}
        | {"mlp_layer_types": ["dense", "sparse"]},
        ("ForCausalLM", "Model"),
    ),
    "trocr": (  # BART's decoder alone: scaled token vectors, no embedding norm
        dict(vocab_size=V, d_model=32, decoder_layers=2, decoder_attention_heads=4)
        | dict(decoder_ffn_dim=64, max_position_embeddings=64, scale_embedding=True)
        | dict(layernorm_embedding=False, is_decoder=True, tie_word_embeddings=False),
        ("ForCausalLM",),
    ),
    "solar_open": ({**DECODER, **GLM4_MOE}, ("ForCausalLM", "Model")),  # every layer routed
    "cohere2": (  # a sliding layer (window shorter than the rows) and a NoPE global one
        {**DECODER, "sliding_window": 4, "layer_types": ["sliding_attention", "full_attention"]},
        ("ForCausalLM", "Model"),
    ),
    "granite_swa": (  # a sliding layer (window shorter than the rows) with its own rotary
        # base, a full NoPE one, sinks; Granite's multipliers
        {**DECODER, **GRANITE_MULTIPLIERS, "sliding_window": 4}
        | {"layer_types": ["sliding_attention", "full_attention", "sliding_attention"]}
        | {"layer_rope_theta": [500.0, 0, 10000.0], "num_hidden_layers": 3},
        ("ForCausalLM", "Model"),
    ),
    "granitemoe_swa": (  # a full NoPE layer, then a sliding one with its own rotary base
        {**DECODER, **GRANITE_MULTIPLIERS, "num_local_experts": 4, "num_experts_per_tok": 2}
        | {"shared_intermediate_size": 24, "sliding_window": 4, "layer_rope_theta": [0, 500.0]}
        | {"layer_types": ["full_attention", "sliding_attention"]},
        ("ForCausalLM", "Model"),
    ),
    "flint": (  # sliding rotating layers around a full NoPE one, sinks, a dense middle layer
        {**DECODER, "num_hidden_layers": 3, "sliding_window": 4, "mlp_only_layers": [1]}
        | {"layer_types": ["sliding_attention", "full_attention", "sliding_attention"]}
        | {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 16}
        | {"shared_expert_intermediate_size": 24},
        ("ForCausalLM", "Model"),
    ),
    "cohere2_moe": (  # a dense global layer that rotates (prefix width 24), then sliding and
        # NoPE global routed layers with a shared expert averaged in
        {**DECODER, "num_hidden_layers": 3, "sliding_window": 4, "intermediate_size": 16}
        | {"num_experts": 4, "num_experts_per_tok": 2, "num_shared_experts": 1}
        | {"prefix_dense_intermediate_size": 24, "first_k_dense_replace": 1}
        | {"layer_types": ["full_attention", "sliding_attention", "full_attention"]}
        | {"mlp_layer_types": ["dense", "sparse", "sparse"], "logit_scale": 0.3},
        ("ForCausalLM", "Model"),
    ),
    "aria_text": (  # softmax over the top-2 logits; a shared MLP two experts wide
        {**DECODER, "intermediate_size": 16, "moe_num_experts": 4, "moe_topk": 2},
        ("ForCausalLM", "Model"),
    ),
}


def make(model_type: str, task: str) -> torch.nn.Module:
    """A perturbed tiny transformers model of the alias's `task` class."""
    kwargs, _ = CASES[model_type]
    config = hf.AutoConfig.for_model(model_type, **kwargs)
    conv = get_registry().converter(model_type)
    torch.manual_seed(0)
    model = model_class(conv, task, config, None)(config)
    perturb(model, scale=0.1)
    return model.eval()


def inputs(model: torch.nn.Module) -> tuple[dict, torch.Tensor]:
    ids, mask = padded_batch(V)
    pad = model.config.pad_token_id
    if pad is not None:  # a decoder's classifier finds each row's last token by its pads
        ids = ids.masked_fill(mask == 0, pad)
    batch = {"input_ids": ids, "attention_mask": mask}
    if model.config.is_encoder_decoder:
        batch["decoder_input_ids"] = padded_batch(V, length=6)[0]
        mask = torch.ones_like(batch["decoder_input_ids"])  # compared on decoder positions
    return batch, mask


def output(out) -> torch.Tensor:
    for name in ("logits", "start_logits", "last_hidden_state"):
        if getattr(out, name, None) is not None:
            return getattr(out, name)
    raise AssertionError(f"no output to compare in {type(out).__name__}")


CASE_TASKS = [(t, task) for t, (_, tasks) in CASES.items() for task in tasks]


@pytest.mark.parametrize(("model_type", "task"), CASE_TASKS)
def test_outputs_equal_transformers(tmp_path, model_type, task):
    ref = make(model_type, task)
    ours = archzoo.from_hf(save_hf(ref, tmp_path / model_type, model_type))
    assert ours.hf_source["model_type"] == model_type
    batch, mask = inputs(ref)
    with torch.no_grad():
        want, got = output(ref(**batch)), output(ours(**batch))
    assert got.shape == want.shape
    if got.dim() == 2:  # one row of scores per sequence
        mask = torch.ones(got.shape[0], 1, dtype=torch.long)
        got, want = got[:, None], want[:, None]
    assert max_diff_unpadded(got, want, mask) <= 1e-4
    seq2seq = get_registry().converter(model_type).family == "encoder-decoder"
    if not (seq2seq and task == "ForCausalLM"):  # its unused cross-attention is skipped
        # (TrOCR's decoder too, whose cross-attention no input of the causal LM reaches)
        decoder_only = ours.family != "encoder-decoder"
        read = [p for n, p in ref.named_parameters() if not (decoder_only and ".encoder_attn" in n)]
        assert ours.num_parameters() == sum(p.numel() for p in read)


GENERATES = [  # GPT-2's LMHeadModel generates; XLM's WithLMHeadModel is no causal LM here
    t
    for t, (_, tasks) in CASES.items()
    if tasks[0].endswith(("CausalLM", "Generation")) or tasks[0] == "LMHeadModel"
]


@pytest.mark.parametrize("model_type", GENERATES)
def test_greedy_generation_equals_transformers(tmp_path, model_type):
    ref = make(model_type, CASES[model_type][1][0])
    ours = archzoo.from_hf(save_hf(ref, tmp_path / model_type, model_type))
    if not ref.config.is_encoder_decoder:
        return assert_greedy_equal(ref, ours)
    ids, mask = padded_batch(V, length=8, real=5)
    kwargs = {"max_new_tokens": 10, "min_new_tokens": 10, "do_sample": False}
    want = ref.generate(ids, attention_mask=mask, **kwargs)
    assert torch.equal(ours.generate(ids, attention_mask=mask, **kwargs), want)


def test_an_alias_exports_as_itself_and_its_layout_as_the_type_it_shares(tmp_path):
    ref = make("camembert", "ForMaskedLM")
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "hf"))
    report = archzoo.to_hf(ours, tmp_path / "out")
    written = json.loads((tmp_path / "out" / "config.json").read_text())
    assert (report["model_type"], written["model_type"]) == ("camembert", "camembert")
    assert written["architectures"] == ["CamembertForMaskedLM"]
    ours.hf_source = None  # the same spec, not imported: RoBERTa's table holds it first
    assert archzoo.to_hf(ours, tmp_path / "plain")["model_type"] == "roberta"


def test_an_alias_naming_a_task_its_type_lacks_is_refused():
    from archzoo.parts.registry import Registrar
    from archzoo.plugins.converters.bert import RobertaConverter

    bad = Alias("robertina", RobertaConverter, "Robertina", tasks=("ForTranslation",))
    with pytest.raises(RegistryError, match="alias 'robertina': RobertaConverter has no task"):
        Registrar("test").add_alias(bad)


def test_renamed_keys_and_defaults_are_read_as_the_tables_keys():
    """InternLM3's published config.json spells attention_bias and mlp_bias `qkv_bias` and
    `bias` (its config class's attribute_map); mT5's config leaves out its gated-GeLU FFN."""
    internlm3 = get_registry().converter("internlm3")
    config = {**hf.InternLM3Config(**CASES["internlm3"][0]).to_dict(), "qkv_bias": True}
    for key in ("attention_bias", "mlp_bias"):
        config.pop(key)
    spec = internlm3.to_spec({**config, "bias": True})
    assert (spec["attention"]["bias"], spec["attention"]["out_bias"], spec["ffn"]["bias"]) == (
        True,
        True,
        True,
    )
    mt5 = get_registry().converter("mt5")
    config = hf.MT5Config(**T5).to_dict()
    config.pop("feed_forward_proj")
    assert mt5.to_spec(config)["ffn"] == {"kind": "glu", "activation": "geglu_new", "bias": False}
    assert mt5.to_spec(config)["head"]["rescale"] is False


def test_exaone_reads_its_own_config_keys():
    """EXAONE 3's published config.json spells num_hidden_layers, rms_norm_eps and hidden_act
    `num_layers`, `layer_norm_epsilon` and `activation_function` (ExaoneConfig's
    attribute_map); another activation is refused, naming the key."""
    exaone = get_registry().converter("exaone")
    config = hf.ExaoneConfig(**CASES["exaone"][0]).to_dict()
    for key in ("num_hidden_layers", "rms_norm_eps", "hidden_act"):
        config.pop(key)
    config.update(num_layers=3, layer_norm_epsilon=1e-3, activation_function="silu")
    spec = exaone.to_spec(config)
    assert (spec["n_layers"], spec["norm"]["eps"]) == (3, 1e-3)
    with pytest.raises(ConversionError, match="activation_function='gelu' is not supported"):
        exaone.to_spec({**config, "activation_function": "gelu"})
