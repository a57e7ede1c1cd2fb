"""Published transformers configurations of zoo specs that the converters import (no download:
the sizes are typed from each model card's config.json)."""

from __future__ import annotations

ROPE = {"rope_type": "default"}

# zoo name -> (transformers config class, its keyword arguments)
PUBLISHED: dict[str, tuple[str, dict]] = {
    "mixtral-8x7b": (
        "MixtralConfig",
        dict(
            vocab_size=32000,
            hidden_size=4096,
            intermediate_size=14336,
            num_hidden_layers=32,
            num_attention_heads=32,
            num_key_value_heads=8,
            num_local_experts=8,
            num_experts_per_tok=2,
            max_position_embeddings=32768,
            rms_norm_eps=1e-5,
            rope_parameters={**ROPE, "rope_theta": 1e6},
            tie_word_embeddings=False,
            sliding_window=None,
        ),
    ),
    "qwen2-0.5b": (
        "Qwen2Config",
        dict(
            vocab_size=151936,
            hidden_size=896,
            intermediate_size=4864,
            num_hidden_layers=24,
            num_attention_heads=14,
            num_key_value_heads=2,
            max_position_embeddings=131072,
            rms_norm_eps=1e-6,
            rope_parameters={**ROPE, "rope_theta": 1e6},
            tie_word_embeddings=True,
        ),
    ),
    "qwen3-0.6b": (
        "Qwen3Config",
        dict(
            vocab_size=151936,
            hidden_size=1024,
            intermediate_size=3072,
            num_hidden_layers=28,
            num_attention_heads=16,
            num_key_value_heads=8,
            head_dim=128,
            max_position_embeddings=40960,
            rms_norm_eps=1e-6,
            rope_parameters={**ROPE, "rope_theta": 1e6},
            tie_word_embeddings=True,
        ),
    ),
    "qwen3-30b-a3b": (
        "Qwen3MoeConfig",
        dict(
            vocab_size=151936,
            hidden_size=2048,
            intermediate_size=6144,
            moe_intermediate_size=768,
            num_hidden_layers=48,
            num_attention_heads=32,
            num_key_value_heads=4,
            head_dim=128,
            num_experts=128,
            num_experts_per_tok=8,
            norm_topk_prob=True,
            max_position_embeddings=40960,
            rms_norm_eps=1e-6,
            rope_parameters={**ROPE, "rope_theta": 1e6},
            tie_word_embeddings=False,
            decoder_sparse_step=1,
            mlp_only_layers=[],
        ),
    ),
    "olmo2-1b": (
        "Olmo2Config",
        dict(
            vocab_size=100352,
            hidden_size=2048,
            intermediate_size=8192,
            num_hidden_layers=16,
            num_attention_heads=16,
            num_key_value_heads=16,
            max_position_embeddings=4096,
            rms_norm_eps=1e-6,
            rope_parameters={**ROPE, "rope_theta": 500000.0},
            tie_word_embeddings=False,
        ),
    ),
    "gemma-2b": (
        "GemmaConfig",
        dict(
            vocab_size=256000,
            hidden_size=2048,
            intermediate_size=16384,
            num_hidden_layers=18,
            num_attention_heads=8,
            num_key_value_heads=1,
            head_dim=256,
            max_position_embeddings=8192,
            rms_norm_eps=1e-6,
            rope_parameters={**ROPE, "rope_theta": 10000.0},
            tie_word_embeddings=True,
        ),
    ),
    "smollm3-3b": (
        "SmolLM3Config",
        dict(
            vocab_size=128256,
            hidden_size=2048,
            intermediate_size=11008,
            num_hidden_layers=36,
            num_attention_heads=16,
            num_key_value_heads=4,
            max_position_embeddings=65536,
            rms_norm_eps=1e-6,
            rope_parameters={**ROPE, "rope_theta": 5000000.0},
            tie_word_embeddings=True,
            no_rope_layer_interval=4,
        ),
    ),
}

CAUSAL_LM = {
    "MixtralConfig": "MixtralForCausalLM",
    "Qwen2Config": "Qwen2ForCausalLM",
    "Qwen3Config": "Qwen3ForCausalLM",
    "Qwen3MoeConfig": "Qwen3MoeForCausalLM",
    "Olmo2Config": "Olmo2ForCausalLM",
    "GemmaConfig": "GemmaForCausalLM",
    "SmolLM3Config": "SmolLM3ForCausalLM",
}
