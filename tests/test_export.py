"""`archzoo.to_hf` and `zoo export`: every imported type round-trips into transformers with
no missing or unexpected tensors and the same logits; zoo specs find their HF type from the
converter tables; refusals name what blocks them and leave nothing on disk."""

from __future__ import annotations

import json

import pytest
import torch
import transformers as hf
from click.testing import CliRunner
from hf_util import perturb, save_hf
from hostile_util import TINY_SETS, zoo_fails
from test_nllb_moe import fix_nllb_moe_dispatch

import archzoo
from archzoo.cli.main import main
from archzoo.hf.express import ExportError
from archzoo.hf.probe import model_class, probe_batch
from archzoo.parts.converter import Converter
from archzoo.parts.registry import get_registry

V = 96
# tiny sizes by spec path: an HF config is made from each converter's own table
T5GEMMA_STACK = {
    "vocab_size": V,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 8,
    "sliding_window": 3,
}
TINY_SPEC = {
    "vocab_size": V,
    "d_model": 32,
    "n_layers": 2,
    "n_heads": 4,
    "head_dim": 8,
    "d_ff": 64,
    "max_len": 64,
    "attention.n_kv_heads": 2,
    "decoder.n_layers": 2,
    "decoder.n_heads": 4,
    "decoder.d_ff": 64,
    "embedding.embedding_size": 16,
    "ffn.n_experts": 4,
    "ffn.top_k": 2,
    "ffn.d_expert": 16,
}
# settings that make a type's table-computed parts (adjust) non-trivial at tiny size
EXTRA = {
    "gpt_neo": {"attention_types": [[["global", "local"], 1]], "window_size": 4},
    "mistral": {"sliding_window": 4},
    "xmod": {"languages": ["en_XX", "de_DE"], "default_language": "de_DE"},  # adapters
    "squeezebert": {"embedding_size": 32, "post_attention_groups": 2},  # = hidden_size
    "convbert": {"num_groups": 2, "conv_kernel_size": 3},  # the FFN's saved blocks
    "mobilebert": {"intra_bottleneck_size": 16, "num_feedforward_networks": 2},
    "granitemoe": {
        "embedding_multiplier": 12.0,
        "residual_multiplier": 0.22,
        "logits_scaling": 6.0,
    },
    "granitemoeshared": {"shared_intermediate_size": 24, "logits_scaling": 6.0},
    "vaultgemma": {"sliding_window": 4},
    "hyperclovax": {"residual_multiplier": 0.22, "logits_scaling": 0.25},
    "cohere": {"use_qk_norm": True, "logit_scale": 0.3},
    "cohere2": {"sliding_window": 4, "layer_types": ["sliding_attention", "full_attention"]},
    "cohere_compass_text": {  # a sliding layer rotating at base 500, a NoPE global one
        "sliding_window": 4,
        "layer_types": ["sliding_attention", "full_attention"],
        "rope_parameters": {"sliding_attention": {"rope_theta": 500.0}, "full_attention": None},
    },
    "granite_swa": {  # a sliding layer with its own rotary base, a full NoPE one
        "sliding_window": 4,
        "layer_types": ["sliding_attention", "full_attention"],
        "layer_rope_theta": [500.0, 0],
    },
    "granitemoe_swa": {
        "sliding_window": 4,
        "layer_types": ["full_attention", "sliding_attention"],
        "layer_rope_theta": [0, 500.0],
        "shared_intermediate_size": 24,
    },
    "cohere2_moe": {  # a dense global layer that rotates, then a sliding routed one
        "sliding_window": 4,
        "layer_types": ["full_attention", "sliding_attention"],
        "mlp_layer_types": ["dense", "sparse"],
        "prefix_dense_intermediate_size": 24,
        "num_shared_experts": 1,
    },
    "flint": {
        "sliding_window": 4,
        "layer_types": ["sliding_attention", "full_attention"],
        "mlp_only_layers": [1],
        "shared_expert_intermediate_size": 24,
    },
    "granite": {  # multipliers that are not 1, the logits divided by 3
        "embedding_multiplier": 12.0,
        "residual_multiplier": 0.22,
        "attention_multiplier": 0.05,
        "logits_scaling": 3.0,
    },
    "smollm3": {"no_rope_layers": [1, 0]},
    "qwen3_moe": {"mlp_only_layers": [1]},
    "glm4_moe_lite": {  # small MLA, a routed layer before a dense one, group routing
        "num_key_value_heads": 4,
        "mlp_layer_types": ["sparse", "dense"],
        "n_group": 2,
        "topk_group": 1,
        "q_lora_rank": 24,
        "kv_lora_rank": 16,
        "qk_nope_head_dim": 8,
        "v_head_dim": 8,
    },
    "axk1": {  # GLM-4.7-Flash's settings: a routed layer (its output normed) before a dense one
        "num_key_value_heads": 4,
        "mlp_layer_types": ["sparse", "dense"],
        "n_group": 2,
        "topk_group": 1,
        "q_lora_rank": 24,
        "kv_lora_rank": 16,
        "qk_nope_head_dim": 8,
        "v_head_dim": 8,
    },
    "qwen2_moe": {"mlp_only_layers": [1], "shared_expert_intermediate_size": 24},
    "albert": {"num_hidden_groups": 2},
    "roberta": {"pad_token_id": 1},
    "openai-gpt": {"n_inner": None},
    "gptj": {"rotary_dim": 4},
    "mamba2": {"num_heads": 4, "head_dim": 16, "state_size": 8, "n_groups": 2, "chunk_size": 4},
    "qwen3_next": {  # gated attention on layer 1; Gated DeltaNet 2 key heads, 4 value heads
        "num_key_value_heads": 2,
        "layer_types": ["linear_attention", "full_attention"],
        "linear_num_key_heads": 2,
        "linear_num_value_heads": 4,
        "linear_key_head_dim": 8,
        "linear_value_head_dim": 6,
        "shared_expert_intermediate_size": 24,
    },
    "qwen3_5_moe_text": {  # gated attention on layer 1; Gated DeltaNet 2 key, 4 value heads
        "num_key_value_heads": 2,
        "layer_types": ["linear_attention", "full_attention"],
        "linear_num_key_heads": 2,
        "linear_num_value_heads": 4,
        "linear_key_head_dim": 8,
        "linear_value_head_dim": 6,
        "shared_expert_intermediate_size": 24,
    },
    "lara_mini": {  # Gated DeltaNet, a 3-key window, NoPE attention: one layer of each
        "num_hidden_layers": 3,
        "num_key_value_heads": 2,
        "layer_types": ["linear_attention", "sliding_attention", "full_attention"],
        "sliding_window": 3,
        "linear_num_key_heads": 2,
        "linear_num_value_heads": 4,
        "linear_key_head_dim": 8,
        "linear_value_head_dim": 6,
        "shared_expert_intermediate_size": 24,
    },
    "qwen3_5_text": {  # gated attention on layer 1; Gated DeltaNet 2 key, 4 value heads
        "num_key_value_heads": 2,
        "layer_types": ["linear_attention", "full_attention"],
        "linear_num_key_heads": 2,
        "linear_num_value_heads": 4,
        "linear_key_head_dim": 8,
        "linear_value_head_dim": 6,
    },
    "bamba": {  # attention on layer 1; 4 SSD heads of 16 in 2 groups, chunks of 4
        "num_key_value_heads": 2,
        "attn_layer_indices": [1],
        "mamba_n_heads": 4,
        "mamba_d_head": 16,
        "mamba_d_state": 8,
        "mamba_n_groups": 2,
        "mamba_chunk_size": 4,
    },
    "zamba2": {  # a shared block with adapters (rank 4) and rotary before layer 1's Mamba 2
        "layers_block_type": ["linear_attention", "hybrid"],
        "attention_head_dim": 16,  # 2 x hidden_size over 4 heads: what the adapters fit
        "n_mamba_heads": 4,
        "mamba_d_state": 8,
        "mamba_ngroups": 2,
        "chunk_size": 4,
        "adapter_rank": 4,
        "use_shared_attention_adapter": True,
        "use_mem_rope": True,
    },
    "zamba": {  # the shared block before both Mamba layers (transformers' weight tying needs
        # two uses), 2 Mamba heads with their own x_proj and dt_proj
        "layers_block_type": ["hybrid", "hybrid"],
        "num_key_value_heads": 2,
        "attention_head_dim": 16,
        "n_mamba_heads": 2,
        "mamba_d_state": 8,
    },
    "falcon_h1": {  # 4 SSD heads of 8 in 2 groups beside GQA 4/2, chunks of 4
        "num_key_value_heads": 2,
        "mamba_d_ssm": 32,
        "mamba_n_heads": 4,
        "mamba_d_head": 8,
        "mamba_d_state": 8,
        "mamba_n_groups": 2,
        "mamba_chunk_size": 4,
    },
    "granitemoehybrid": {  # attention (rotary) on layer 1; 4 SSD heads of 16 in 2 groups
        "num_key_value_heads": 2,
        "layer_types": ["linear_attention", "full_attention"],
        "position_embedding_type": "rope",
        "mamba_n_heads": 4,
        "mamba_d_head": 16,
        "mamba_d_state": 8,
        "mamba_n_groups": 2,
        "mamba_chunk_size": 4,
        "num_local_experts": 4,
        "shared_intermediate_size": 24,
    },
    "jamba": {  # attention on layer 1, experts on layer 0
        "num_key_value_heads": 2,
        "attn_layer_period": 2,
        "attn_layer_offset": 1,
        "expert_layer_period": 2,
        "expert_layer_offset": 0,
        "num_experts": 4,
        "mamba_d_state": 4,
    },
    "nemotron_h": {  # a Mamba 2 layer, an MLP layer and an attention layer
        "layers_block_type": ["linear_attention", "mlp", "full_attention"],
        "num_key_value_heads": 2,
        "mamba_num_heads": 4,
        "mamba_head_dim": 16,
        "ssm_state_size": 8,
        "n_groups": 2,
        "chunk_size": 4,
    },
    "olmo_hybrid": {  # attention on layer 1; 2 key heads of 8, 4 value heads of 6
        "num_key_value_heads": 2,
        "layer_types": ["linear_attention", "full_attention"],
        "linear_num_key_heads": 2,
        "linear_num_value_heads": 4,
        "linear_key_head_dim": 8,
        "linear_value_head_dim": 6,
    },
    "minimax": {  # lightning on layer 0 (blocks of 4), GQA attention on layer 1
        "num_key_value_heads": 2,
        "layer_types": ["linear_attention", "full_attention"],
        "block_size": 4,
        "full_attn_alpha_factor": 1.5,
        "mlp_beta_factor": 0.9,
    },
    "kimi_linear": {  # KDA (2 heads of 8) on layer 0, MLA on layer 1; dense then routed FFN
        "num_key_value_heads": 4,
        "layer_types": ["linear_attention", "full_attention"],
        "mlp_layer_types": ["dense", "sparse"],
        "linear_num_heads": 2,
        "linear_head_dim": 8,
        "kv_lora_rank": 16,
        "qk_nope_head_dim": 8,
        "v_head_dim": 8,
        "n_group": 2,
        "topk_group": 1,
    },
    "lfm2_moe": {"num_key_value_heads": 2, "layer_types": ["conv", "full_attention"]},
    "lfm2": {  # a conv layer and an attention layer; the FFN width auto-adjusted: 64 -> 48
        "num_key_value_heads": 2,
        "layer_types": ["conv", "full_attention"],
        "block_multiple_of": 16,
    },  # its MLP is always 4 x n_embd
    "longformer": {"attention_window": [4, 6]},  # a window per layer: layers: overrides
    "esm": {"pad_token_id": 1, "mask_token_id": 4, "token_dropout": True},  # ESM's own ids
    "esmc": {"num_key_value_heads": 4},  # EsmcConfig refuses grouped-query attention
    "bert-generation": {"is_decoder": True},  # its LM class is a causal decoder
    "pegasus_x": {"num_global_tokens": 3, "block_size": 4},  # 2 blocks of 4, staggered
    "funnel": {"block_sizes": [1, 1], "num_decoder_layers": 1, "pooling_type": "max"},
    "led": {"attention_window": 4},
    "t5gemma": {  # the sizes sit in the two stacks' sub-configs; windows narrower than rows
        "encoder": {**T5GEMMA_STACK, "num_hidden_layers": 2},
        "decoder": {**T5GEMMA_STACK, "num_hidden_layers": 3},
    },
    "fsmt": {
        "tgt_vocab_size": 112,
        "langs": ["en", "de"],
    },  # a target vocabulary of its own  # transformers pads rows to the window: keep it short
    "switch_transformers": {  # layer 1 of each stack routed, 3 tokens per expert and row
        "num_sparse_encoder_layers": 1,
        "num_sparse_decoder_layers": 1,
        "num_experts": 4,
        "expert_capacity": 3,
    },
    "ministral3": {  # YaRN over 4 positions, queries scaled from position 4 on
        "rope_parameters": {
            "rope_type": "yarn",
            "rope_theta": 10000.0,
            "factor": 4.0,
            "original_max_position_embeddings": 4,
            "llama_4_scaling_beta": 0.5,
        },
    },
    "nllb-moe": {  # layer 1 of each stack routed, 3 slots per expert in training
        "num_experts": 4,
        "encoder_sparse_step": 2,
        "decoder_sparse_step": 2,
        "expert_capacity": 3,
    },
    "deepseek_v3": {  # a routed layer after a dense one, group routing, small MLA, YaRN
        "first_k_dense_replace": 1,
        "n_group": 2,
        "topk_group": 1,
        "q_lora_rank": 24,
        "kv_lora_rank": 16,
        "qk_nope_head_dim": 8,
        "v_head_dim": 8,
        "rope_parameters": {
            "rope_type": "yarn",
            "rope_theta": 10000.0,
            "factor": 4.0,
            "original_max_position_embeddings": 16,
            "mscale": 1.0,
            "mscale_all_dim": 1.0,
        },
    },
    # issue 33's long-tail decoders: a sliding and a full layer, small latents and experts
    "olmo3": {"sliding_window": 4, "layer_types": ["sliding_attention", "full_attention"]},
    "exaone4": {"sliding_window": 4, "layer_types": ["sliding_attention", "full_attention"]},
    "codegen": {"rotary_dim": 4},
    "modernbert-decoder": {"local_attention": 8},
    "minicpm3": {"kv_lora_rank": 16, "q_lora_rank": 24, "qk_nope_head_dim": 8},
    "deepseek_v2": {"kv_lora_rank": 16, "q_lora_rank": 24, "qk_nope_head_dim": 8, "v_head_dim": 8},
    "dots1": {
        "n_shared_experts": 1,
        "first_k_dense_replace": 1,
        "sliding_window": 4,
        "layer_types": ["full_attention", "sliding_attention"],
    },
    "glm4_moe": {"use_qk_norm": True, "attention_bias": True},
    "mellum": {
        "sliding_window": 4,
        "layer_types": ["sliding_attention", "full_attention"],
        "mlp_layer_types": ["sparse", "dense"],
    },
    "hunyuan_v1_moe": {"num_experts": 4, "moe_topk": 2},
    "ernie4_5_moe": {"moe_num_shared_experts": 1},
    "minimax_m2": {"rotary_dim": 4},
    "openai_privacy_filter": {"sliding_window": 3},  # 3 keys either side: windows that bite
    "llama4_text": {  # a rotary layer in chunks of 4 with experts, a NoPE layer dense
        "no_rope_layers": [1, 0],
        "moe_layers": [0],
        "attention_chunk_size": 4,
        "floor_scale": 2,
    },
    "dbrx": {
        "attn_config": {"kv_n_heads": 2, "clip_qkv": 1.0, "rope_theta": 10000.0},
        "ffn_config": {"ffn_hidden_size": 16, "moe_num_experts": 4, "moe_top_k": 2},
    },
}
SPECIAL_IDS = {
    "pad_token_id": 0,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "decoder_start_token_id": 0,
    "forced_eos_token_id": 2,
}
TYPES = [
    t
    for t in get_registry().model_types()
    if isinstance(get_registry().converter(t), Converter)
    and get_registry().converter(t).tensors is not None
]


def tiny_hf(model_type: str, task: str | None = None) -> torch.nn.Module:
    """A perturbed tiny transformers model of a registered type, sized through its table."""
    conv = get_registry().converter(model_type)
    fields = [*conv.fields, *(f for t in conv.tasks.values() for f in t.fields)]
    sizes = {
        f.hf.split("|")[0]: TINY_SPEC[f.paths[0]]
        for f in fields
        if f.paths[0] in TINY_SPEC and f.values is None  # a renamed value is no size
    }
    config = hf.AutoConfig.for_model(model_type, **{**sizes, **EXTRA.get(model_type, {})})
    for key, small in SPECIAL_IDS.items():  # default ids of the real vocabulary
        if isinstance(getattr(config, key, None), int) and getattr(config, key) >= V:
            setattr(config, key, small)
    task = conv.default_task if task is None else task
    cls = model_class(conv, task, config, None) if task else hf.AutoModelForCausalLM
    if not task:
        cls = cls._model_mapping[type(config)]
    model = cls(config)
    perturb(model)
    for module in model.modules():  # frozen sinusoid tables (Marian, Pegasus) stay exact
        if hasattr(module, "create_weight"):
            module.weight.data.copy_(module.create_weight())
        elif hasattr(module, "make_positions"):  # FSMT's, with its zero padding row
            module.weight.data.copy_(module.get_embedding(*module.weight.shape, module.padding_idx))
    return model.eval()


def batch(encoder_decoder: bool, pad: int | None = 0):
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(3, V, (2, 7), generator=g)
    mask = torch.ones_like(ids)
    if pad is not None:
        ids[1, 5:], mask[1, 5:] = pad, 0
    extra = (
        {"decoder_input_ids": torch.randint(3, V, (2, 4), generator=g)} if encoder_decoder else {}
    )
    return {"input_ids": ids, "attention_mask": mask, **extra}, mask


def loaded(cls: type, directory) -> torch.nn.Module:
    """transformers' model of an export, asserting it loaded with nothing missing or extra."""
    model, info = cls.from_pretrained(directory, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    assert not info["mismatched_keys"], info
    return model.eval()


def max_diff(a, b, mask) -> float:
    keep = mask.bool() if a.dim() >= 2 and a.shape[:2] == mask.shape else slice(None)
    return (a[keep] - b[keep]).abs().max().item()


def compared(out) -> torch.Tensor:
    """The output a round trip compares: the logits, else CLIP's sentence vector, else the
    hidden states (a type transformers has headless only: Molmo2's text model)."""
    for name in ("logits", "text_embeds"):
        if getattr(out, name, None) is not None:
            return getattr(out, name)
    return out.last_hidden_state


@pytest.mark.parametrize("model_type", TYPES)
def test_every_type_round_trips_into_transformers(tmp_path, monkeypatch, model_type):
    if model_type == "nllb-moe":  # transformers 5.24 runs experts 0 and 1 only: fixed there
        fix_nllb_moe_dispatch(monkeypatch)
    ref = tiny_hf(model_type)
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "hf", model_type))
    report = archzoo.to_hf(ours, tmp_path / "out")
    assert report["model_type"] == model_type  # the type it came from, when it fits exactly
    assert json.loads((tmp_path / "out" / "config.json").read_text())["model_type"] == model_type
    back = loaded(type(ref), tmp_path / "out")
    inputs, mask = batch(ours.family == "encoder-decoder", pad=None)
    with torch.no_grad():
        assert max_diff(compared(ref(**inputs)), compared(back(**inputs)), mask) <= 1e-5
    again = archzoo.from_hf(tmp_path / "out")  # and archzoo reads its own export back
    assert again.spec.data == {**ours.spec.data, "name": again.spec.name}
    a, b = ours.state_dict(), again.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


SPECS = {  # zoo name -> (tiny overrides, the HF type its table round trip finds)
    "gpt2": ({}, "gpt2"),
    "bert-base": ({}, "bert"),
    "t5-small": ({"max_len": 512}, "t5"),
    "llama2-7b": ({"attention.n_kv_heads": 2}, "llama"),
    "gpt2 with rotary": ({"position": "rotary"}, "gpt_neox"),
}


@pytest.mark.parametrize("name", sorted(SPECS))
def test_zoo_specs_export_to_their_hf_type_with_equal_logits(tmp_path, name):
    overrides, expected = SPECS[name]
    sizes = {k: v for k, v in TINY_SPEC.items() if "." not in k and k != "head_dim"}
    torch.manual_seed(0)
    model = archzoo.build_model(name.split()[0], {**sizes, **overrides}).eval()
    perturb(model)
    report = archzoo.to_hf(model, tmp_path / "out")
    assert report["model_type"] == expected
    cls = getattr(hf, report["architecture"])
    back = loaded(cls, tmp_path / "out")
    inputs, mask = batch(model.family == "encoder-decoder", model.spec.data["pad_token_id"])
    with torch.no_grad():
        ours, theirs = model(**inputs).logits, back(**inputs).logits
    assert max_diff(ours, theirs, mask) <= 1e-5


@pytest.mark.parametrize(
    "model_type, task, head",
    [
        ("bert", "ForSequenceClassification", "classifier"),
        ("gpt2", "ForTokenClassification", "token_classifier"),
        ("llama", "Model", "none"),
        ("exaone", "Model", "none"),  # Llama's outer names around EXAONE's inner ones
        ("t5", "EncoderModel", "none"),
        ("bart", "ForSequenceClassification", "classifier"),
        ("umt5", "ForSequenceClassification", "classifier"),
    ],
)
def test_task_heads_export_as_their_architecture(tmp_path, model_type, task, head):
    ref = tiny_hf(model_type, task)
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "hf"))
    assert ours.spec.data["head"]["kind"] == head
    report = archzoo.to_hf(ours, tmp_path / "out")
    assert report["architecture"] == type(ref).__name__
    back = loaded(type(ref), tmp_path / "out")
    inputs, mask = batch(ours.family == "encoder-decoder", pad=None)
    if ours.spec.data["head"].get("pooling") == "eos":  # rows end in <eos>, decoder shifted
        inputs, mask = probe_batch(ours.spec)
    name = "last_hidden_state" if head == "none" else "logits"
    with torch.no_grad():
        a, b = getattr(ref(**inputs), name), getattr(back(**inputs), name)
    assert max_diff(a, b, mask) <= 1e-5


def test_spec_without_hf_equivalent_is_refused_naming_every_part(tmp_path):
    sizes = {k: v for k, v in TINY_SPEC.items() if "." not in k and k != "head_dim"}
    model = archzoo.build_model(
        "gpt2",
        {
            **sizes,
            "ffn": {"kind": "glu", "activation": "reglu"},
            "attention": {"kind": "strided", "stride": 4},
        },
    )
    with pytest.raises(ExportError) as err:
        archzoo.to_hf(model, tmp_path / "out")
    message = str(err.value)
    # reglu alone is now expressible (a supported type's glu has it): strided is named
    assert "no supported type can express: attention.kind: strided\n" in message
    assert "ffn.kind: glu -> mlp" in message  # what the closest type would change
    assert "closest: gpt2" in message
    assert list(tmp_path.iterdir()) == []  # nothing written, no temp directory left


def test_export_whose_probe_fails_writes_nothing(tmp_path, monkeypatch):
    ours = archzoo.from_hf(save_hf(tiny_hf("llama"), tmp_path / "hf"))
    real = Converter.export_state

    def corrupt(self, *args, **kwargs):
        out = real(self, *args, **kwargs)
        name = next(n for n in out if n.endswith("layers.1.mlp.down_proj.weight"))
        out[name] = out[name] * 1.5  # a layout mistake the names alone would not show
        return out

    monkeypatch.setattr(Converter, "export_state", corrupt)
    with pytest.raises(ExportError, match="disagrees with archzoo on a probe batch: logits"):
        archzoo.to_hf(ours, tmp_path / "out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hf"]


def test_tokenizer_files_come_from_tokenizer_from_or_beside_the_weights(tmp_path):
    """Never from the HF directory a weights file's metadata names (tests/test_hostile_export)."""
    source = save_hf(tiny_hf("gpt2"), tmp_path / "hf")
    files = {
        "tokenizer.json": '{"version": "1.0"}',
        "tokenizer_config.json": '{"model_max_length": 64}',
        "special_tokens_map.json": "{}",
        "vocab.json": "{}",
        "merges.txt": "#version: 0.2\n",
        "spiece.model": "binary",
    }
    for name, text in files.items():
        (source / name).write_text(text)
    tuned = tmp_path / "run" / "tuned.safetensors"
    tuned.parent.mkdir()
    archzoo.save(archzoo.from_hf(source), tuned)  # import, fine-tune
    report = archzoo.to_hf(archzoo.load(tuned), tmp_path / "out", tokenizer_from=source)
    assert sorted(report["tokenizer_files"]) == sorted(files)
    for name, text in files.items():
        assert (tmp_path / "out" / name).read_text() == text
        (tuned.parent / name).write_text(text)  # beside the weights, as in a `zoo train` run
    report = archzoo.to_hf(archzoo.load(tuned), tmp_path / "out2")
    assert sorted(report["tokenizer_files"]) == sorted(files)


def test_sharded_export_loads_with_an_index(tmp_path):
    ref = tiny_hf("llama")
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "hf"))
    archzoo.to_hf(ours, tmp_path / "out", max_shard_size="40KB")
    index = json.loads((tmp_path / "out" / "model.safetensors.index.json").read_text())
    shards = sorted(set(index["weight_map"].values()))
    assert len(shards) > 2 and not (tmp_path / "out" / "model.safetensors").exists()
    sizes = [(tmp_path / "out" / s).stat().st_size for s in shards]
    assert max(sizes) < 80_000  # one tensor over the limit at most (header included)
    back = loaded(type(ref), tmp_path / "out")
    inputs, mask = batch(False, pad=None)
    with torch.no_grad():
        assert max_diff(ref(**inputs).logits, back(**inputs).logits, mask) == 0.0


def test_existing_directory_is_refused_and_kept(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "notes.txt").write_text("mine")
    model = archzoo.build_model("gpt2", {k: v for k, v in TINY_SPEC.items() if "." not in k})
    with pytest.raises(archzoo.WeightsError, match="not empty"):
        archzoo.to_hf(model, tmp_path / "out")
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["notes.txt"]


@pytest.mark.parametrize("tolerance", ["nan", "-1"])
def test_a_negative_or_nan_tolerance_is_refused_before_exporting(tmp_path, tolerance):
    """It was read as a failed probe: 'logits differ by 0 > tolerance nan', after the work."""
    args = ["export", "gpt2", *TINY_SETS, "--hf", tmp_path / "out", "--tolerance", tolerance]
    out = zoo_fails(args, "--tolerance", f"expected a number >= 0, got {float(tolerance)}")
    assert "disagrees" not in out
    assert not (tmp_path / "out").exists()
    model = archzoo.build_model("gpt2", {k: v for k, v in TINY_SPEC.items() if "." not in k})
    with pytest.raises(ExportError, match="tolerance must be a number >= 0, got nan"):
        archzoo.to_hf(model, tmp_path / "lib", tolerance=float("nan"))
    assert not (tmp_path / "lib").exists()


def test_zoo_export_of_a_zoo_name_and_of_a_refused_spec(tmp_path):
    sets = ["--set", "n_layers=2", "--set", "d_model=32", "--set", "n_heads=4"]
    sets += ["--set", "vocab_size=96", "--set", "d_ff=64", "--set", "max_len=64"]
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["export", "gpt2", *sets, "--hf", str(out), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output[result.output.index("{") :])
    assert report["model_type"] == "gpt2" and report["architecture"] == "GPT2LMHeadModel"
    loaded(hf.GPT2LMHeadModel, out)
    refused = CliRunner().invoke(
        main, ["export", "gpt2", *sets, "--set", "block=sandwich_ln", "--hf", str(tmp_path / "x")]
    )
    assert refused.exit_code == 2 and "Error: cannot export 'gpt2'" in refused.output
    assert "block.kind: sandwich_ln" in refused.output and "Traceback" not in refused.output
    assert not (tmp_path / "x").exists()


def test_zoo_export_of_a_saved_file_with_overrides(tmp_path):
    ours = archzoo.from_hf(save_hf(tiny_hf("bert"), tmp_path / "hf"))
    archzoo.save(ours, tmp_path / "m.safetensors")
    out = tmp_path / "out"
    args = ["export", str(tmp_path / "m.safetensors"), "--set", "dropout=0.2", "--hf", str(out)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert json.loads((out / "config.json").read_text())["hidden_dropout_prob"] == 0.2
    bad = CliRunner().invoke(main, [*args[:3], "d_model=64", "--hf", str(tmp_path / "y")])
    assert bad.exit_code == 2 and "weights do not fit the spec" in bad.output
